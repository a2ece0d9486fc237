/**
 * A small closed-loop HTTP load generator on node:http: `connections` workers, each with its own
 * keep-alive socket (one shared Agent, maxSockets = connections), sending one request at a time.
 *   runLoad:  for warm-up + measurement; only requests that start after the warm-up and finish
 *             before the end count;
 *   runBatch: exactly `total` requests, as fast as the server answers (e.g. to fill a queue).
 * Traffic goes to 127.0.0.1 only; every request has a timeout, so a run always ends by itself.
 */
import http from 'node:http';

export type RequestSpec = {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
};

export type LoadOptions = {
  port: number;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Builds request number `i` (lets the caller rotate API keys). */
  request(i: number): RequestSpec;
  /** Whether a 2xx response is really a success (e.g. GraphQL's 200 with `errors`). */
  accept?(status: number, body: string): boolean;
  timeoutMs?: number;
};

export type LoadResult = {
  /** Successful responses per second over the measured window. */
  rps: number;
  ok: number;
  /** Every request started, warm-up included (for rate-limit budgeting). */
  sent: number;
  /** Successful responses, warm-up and overlap with the end included (what the server really did). */
  okAll: number;
  /** Requests that failed: non-2xx, rejected bodies, socket errors and timeouts. */
  errors: number;
  /** Non-2xx responses by status code ("200" here means a 2xx whose body was rejected). */
  statuses: Record<string, number>;
  socketErrors: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  /** An example body of a failed response, for diagnosis. */
  sampleError?: string;
  /** Mean ms per stage from the service's `Server-Timing` header (SERVER_TIMING=true), over counted successes. */
  stages?: Record<string, number>;
};

type Response = { status: number; body: string; timing?: string };

function send(agent: http.Agent, port: number, spec: RequestSpec, timeoutMs: number): Promise<Response> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...spec.headers };
    if (spec.body !== undefined) headers['Content-Length'] = Buffer.byteLength(spec.body);
    const req = http.request({ agent, host: '127.0.0.1', port, method: spec.method, path: spec.path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const timing = res.headers['server-timing'];
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), ...(typeof timing === 'string' ? { timing } : {}) }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`request timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(spec.body);
  });
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const started = performance.now();
  const measureFrom = started + opts.warmupMs;
  const endAt = measureFrom + opts.durationMs;
  let latencies = new Float64Array(1 << 16);
  let ok = 0;
  let okAll = 0;
  let errors = 0;
  let socketErrors = 0;
  let next = 0;
  let sampleError: string | undefined;
  const statuses: Record<string, number> = {};
  const accept = opts.accept ?? (() => true);
  const stageSums = new Map<string, number>();
  let timed = 0;
  const addTiming = (header: string) => {
    timed++;
    for (const part of header.split(', ')) {
      const [name, dur] = part.split(';dur=');
      if (name && dur) stageSums.set(name, (stageSums.get(name) ?? 0) + Number(dur));
    }
  };

  const record = (ms: number) => {
    if (ok === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[ok++] = ms;
  };

  const worker = async () => {
    while (performance.now() < endAt) {
      const spec = opts.request(next++);
      const t0 = performance.now();
      let res: Response | undefined;
      let failure: string | undefined;
      try {
        res = await send(agent, opts.port, spec, timeoutMs);
      } catch (e) {
        failure = e instanceof Error ? e.message : String(e);
      }
      const t1 = performance.now();
      const counted = t0 >= measureFrom && t1 <= endAt;
      if (res && res.status >= 200 && res.status < 300 && accept(res.status, res.body)) {
        okAll++;
        if (counted) {
          record(t1 - t0);
          if (res.timing) addTiming(res.timing);
        }
        continue;
      }
      if (counted) {
        errors++;
        if (res) statuses[String(res.status)] = (statuses[String(res.status)] ?? 0) + 1;
        else socketErrors++;
        sampleError ??= res ? `${res.status} ${res.body.slice(0, 300)}` : failure;
      }
      // Back off a little after a socket error so a dead server does not become a hot loop.
      if (!res) await new Promise((r) => setTimeout(r, 10));
    }
  };

  await Promise.all(Array.from({ length: opts.connections }, worker));
  agent.destroy();

  const sorted = latencies.slice(0, ok).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    rps: ok / (opts.durationMs / 1000),
    ok,
    sent: next,
    okAll,
    errors,
    statuses,
    socketErrors,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
    sampleError,
    ...(timed ? { stages: Object.fromEntries([...stageSums].map(([k, v]) => [k, v / timed])) } : {}),
  };
}

export type BatchOptions = {
  port: number;
  connections: number;
  /** Exactly this many requests are sent (request(0) … request(total - 1)). */
  total: number;
  request(i: number): RequestSpec;
  accept?(status: number, body: string): boolean;
  timeoutMs?: number;
  /** Called about once a second with the number of finished requests. */
  onProgress?(done: number): void;
};

export type BatchResult = {
  ok: number;
  errors: number;
  statuses: Record<string, number>;
  socketErrors: number;
  elapsedMs: number;
  /** Successful responses per second over the whole batch. */
  rps: number;
  p50: number;
  p99: number;
  sampleError?: string;
};

export async function runBatch(opts: BatchOptions): Promise<BatchResult> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const accept = opts.accept ?? (() => true);
  const latencies = new Float64Array(opts.total);
  const statuses: Record<string, number> = {};
  let ok = 0;
  let errors = 0;
  let socketErrors = 0;
  let next = 0;
  let sampleError: string | undefined;
  const started = performance.now();
  const progress = opts.onProgress ? setInterval(() => opts.onProgress!(ok + errors), 1000) : undefined;

  const worker = async () => {
    while (next < opts.total) {
      const spec = opts.request(next++);
      const t0 = performance.now();
      try {
        const res = await send(agent, opts.port, spec, timeoutMs);
        if (res.status >= 200 && res.status < 300 && accept(res.status, res.body)) {
          latencies[ok++] = performance.now() - t0;
          continue;
        }
        errors++;
        statuses[String(res.status)] = (statuses[String(res.status)] ?? 0) + 1;
        sampleError ??= `${res.status} ${res.body.slice(0, 300)}`;
      } catch (e) {
        errors++;
        socketErrors++;
        sampleError ??= e instanceof Error ? e.message : String(e);
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };

  try {
    await Promise.all(Array.from({ length: Math.min(opts.connections, opts.total) }, worker));
  } finally {
    if (progress) clearInterval(progress);
    agent.destroy();
  }
  const elapsedMs = performance.now() - started;
  const sorted = latencies.slice(0, ok).sort();
  return {
    ok, errors, statuses, socketErrors, elapsedMs,
    rps: ok / (elapsedMs / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    sampleError,
  };
}
