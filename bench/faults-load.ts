/**
 * Load for the fault scenarios 3, 5–8: sandbox SMS sends (`POST /v1/messages/sms`), each a new
 * logical send with its own `Idempotency-Key` and a `metadata.logical` tag, every answer recorded
 * (when it was sent, how long it took, status, error code, Retry-After, message id). No retries:
 * the scenarios judge the answers themselves. Closed loop (`clients` senders, each waiting for its
 * answer) or open loop (a fixed offered rate whatever the answers, as a real crowd of clients
 * does). Loopback only.
 */
import http from 'node:http';
import { sleep } from './support.ts';

export type Sample = {
  /** When the request was sent (ms since the epoch). */
  at: number;
  ms: number;
  /** HTTP status; 0 for a socket failure (refused, reset) and -1 for no answer within the timeout. */
  status: number;
  code?: string;
  /** The error's `details.reason` (`overloaded`, `database_unavailable`, …), when it names one. */
  reason?: string;
  retryAfter?: string;
  id?: string;
  logical: string;
};

export const RECIPIENTS = ['+14155550100', '+14155550101', '+14155550123', '+12125550199', '+33612345678', '+4915123456789'];

export function sendSms(agent: http.Agent, port: number, key: string, logical: string, timeoutMs = 10_000): Promise<Sample> {
  const body = JSON.stringify({ to: RECIPIENTS[Number(/\d+$/.exec(logical)?.[0] ?? 0) % RECIPIENTS.length], body: `Fault run ${logical}`, metadata: { logical } });
  const at = Date.now();
  const t0 = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (s: Omit<Sample, 'at' | 'ms' | 'logical'>) => {
      if (settled) return;
      settled = true;
      resolve({ at, ms: performance.now() - t0, logical, ...s });
    };
    const req = http.request({
      agent, host: '127.0.0.1', port, method: 'POST', path: '/v1/messages/sms',
      headers: { 'X-API-Key': key, 'Content-Type': 'application/json', 'Idempotency-Key': logical, 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e: NodeJS.ErrnoException) => done({ status: 0, code: e.code ?? e.message }));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        let code: string | undefined;
        let reason: string | undefined;
        let id: string | undefined;
        try {
          const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { id?: string }; error?: { code?: string; details?: { reason?: unknown } } };
          code = parsed.error?.code;
          if (typeof parsed.error?.details?.reason === 'string') reason = parsed.error.details.reason;
          id = status >= 200 && status < 300 ? parsed.data?.id : undefined;
        } catch { /* not JSON */ }
        const ra = res.headers['retry-after'];
        done({ status, ...(code ? { code } : {}), ...(reason ? { reason } : {}), ...(id ? { id } : {}), ...(ra ? { retryAfter: String(ra) } : {}) });
      });
    });
    req.setTimeout(timeoutMs, () => {
      done({ status: -1 });
      req.destroy();
    });
    // The error's code (ECONNRESET, ECONNREFUSED, EPIPE…) is kept: a summary tells a refused
    // connection from one reset on a reused keep-alive socket.
    req.on('error', (e: NodeJS.ErrnoException) => done({ status: 0, code: `${e.code ?? e.message}${req.reusedSocket ? ' (reused socket)' : ''}` }));
    req.end(body);
  });
}

/**
 * The load clients' keep-alive agent. Given a `timeout`, Node's agent honours the server's
 * `Keep-Alive: timeout=5` hint and closes an idle connection a second before it; without one (what
 * these clients did until session 9) an idle connection stays open until the server closes it, and
 * a request sent on it at that moment fails with ECONNRESET: a client-side race (a candidate for the
 * soaks' rare socket errors, which were never caught with their code; samples now carry it), which
 * real clients avoid the same way. `timeout` itself (60 s) only applies to idle connections here:
 * each request sets its own.
 */
export function keepAliveAgent(maxSockets: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, timeout: 60_000 });
}

export type LoadHandle = { samples: Sample[]; stop(): Promise<void>; sent(): number; outstanding(): number };

let runCounter = 0;

/** `clients` senders in a loop until stopped (`pauseMs` between one's answer and its next request). */
export function closedLoop(o: { port: () => number; keys: readonly string[]; clients: number; run?: string; pauseMs?: number; timeoutMs?: number }): LoadHandle {
  const run = o.run ?? `c${process.pid}-${++runCounter}`;
  const agent = keepAliveAgent(o.clients);
  const samples: Sample[] = [];
  let stopped = false;
  let next = 0;
  let inFlight = 0;
  const client = async (c: number) => {
    while (!stopped) {
      const i = next++;
      inFlight++;
      const s = await sendSms(agent, o.port(), o.keys[c % o.keys.length]!, `${run}-${i}`, o.timeoutMs);
      inFlight--;
      samples.push(s);
      // A refused connection answers at once: do not spin.
      if (s.status <= 0) await sleep(50);
      else if (o.pauseMs) await sleep(o.pauseMs);
    }
  };
  const all = Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)));
  return {
    samples, sent: () => next, outstanding: () => inFlight,
    stop: async () => {
      stopped = true;
      await all;
      agent.destroy();
    },
  };
}

/**
 * Requests at `rate` per second (ticks of 10 ms) whatever the answers; at most `maxOutstanding` at
 * once (past it the generator skips, counted in `skipped`), so the harness stays bounded.
 */
export function openLoop(o: { port: () => number; keys: readonly string[]; rate: number; run?: string; maxOutstanding?: number; timeoutMs?: number }): LoadHandle & { skipped(): number } {
  const run = o.run ?? `o${process.pid}-${++runCounter}`;
  const max = o.maxOutstanding ?? 4000;
  const agent = keepAliveAgent(max);
  const samples: Sample[] = [];
  const pending = new Set<Promise<void>>();
  let next = 0;
  let skipped = 0;
  const started = performance.now();
  let issued = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * o.rate);
    for (; issued < due; issued++) {
      if (pending.size >= max) {
        skipped++;
        continue;
      }
      const i = next++;
      const p = sendSms(agent, o.port(), o.keys[i % o.keys.length]!, `${run}-${i}`, o.timeoutMs).then((s) => {
        samples.push(s);
        pending.delete(p);
      });
      pending.add(p);
    }
  }, 10);
  return {
    samples, sent: () => next, outstanding: () => pending.size, skipped: () => skipped,
    stop: async () => {
      clearInterval(timer);
      await Promise.all([...pending]);
      agent.destroy();
    },
  };
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export type Summary = { requests: number; ok: number; by_answer: Record<string, number>; ok_per_second: number; p50_ok_ms: number; p99_ok_ms: number; p99_all_ms: number; max_ms: number };

/** Answers by `status code` (`socket` for 0, `no answer` for -1), rates over `seconds`. */
export function summarize(samples: readonly Sample[], seconds: number): Summary {
  const ok = samples.filter((s) => s.status >= 200 && s.status < 300);
  const by: Record<string, number> = {};
  for (const s of samples) {
    const k = s.status === 0 ? `socket${s.code ? ` ${s.code}` : ''}` : s.status === -1 ? 'no answer' : `${s.status}${s.code ? ` ${s.code}` : ''}${s.reason ? ` (${s.reason})` : ''}`;
    by[k] = (by[k] ?? 0) + 1;
  }
  const r = (n: number) => Math.round(n * 10) / 10;
  return {
    requests: samples.length, ok: ok.length, by_answer: by, ok_per_second: r(ok.length / seconds),
    p50_ok_ms: r(percentile(ok.map((s) => s.ms), 50)), p99_ok_ms: r(percentile(ok.map((s) => s.ms), 99)),
    p99_all_ms: r(percentile(samples.map((s) => s.ms), 99)), max_ms: r(samples.reduce((m, s) => Math.max(m, s.ms), 0)),
  };
}

export const answersLine = (by: Record<string, number>) => Object.entries(by).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}: ${n}`).join(', ') || '0';

/** Samples sent in [from, to). */
export const within = (samples: readonly Sample[], from: number, to: number) => samples.filter((s) => s.at >= from && s.at < to);

/** Polls `GET path` every `everyMs`, recording (time, status), until stopped. */
export function poller(port: () => number, path: string, everyMs = 250): { log: { at: number; status: number }[]; stop(): void } {
  const log: { at: number; status: number }[] = [];
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const at = Date.now();
      const status = await new Promise<number>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: port(), path, agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.setTimeout(5000, () => { req.destroy(); resolve(-1); });
        req.on('error', () => resolve(0));
      });
      log.push({ at, status });
      await sleep(everyMs);
    }
  })();
  return { log, stop: () => { stopped = true; } };
}
