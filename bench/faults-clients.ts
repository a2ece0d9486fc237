/**
 * Clients that insist: `clients` loops share `total` logical SMS sends, each with its own
 * `Idempotency-Key` and a `metadata.logical` tag naming it (so the database can be asked how many
 * messages each logical send made). A send is retried with the same key and body after every
 * failure — refused or reset connection, timeout, 5xx, 409 CONFLICT, 429 — until a 2xx arrives or
 * the bound passes. Loopback only.
 */
import http from 'node:http';
import { sleep } from './support.ts';

export type SendOutcome = {
  /** Logical send → the message id named by the first 2xx the client received. */
  accepted: Map<string, string>;
  /** Logical send → when the attempt that got its first 2xx was sent (ms since the epoch). */
  acceptedAttemptAt: Map<string, number>;
  /** Logical sends still without a 2xx when the bound passed. */
  unanswered: string[];
  /** Requests sent, first attempts included. */
  requests: number;
  /** Failed attempts by cause: HTTP status, or `socket` (refused, reset, timed out). */
  failures: Record<string, number>;
  /** Logical sends that needed at least one retry. */
  retried: number;
  /** Logical sends whose retries met 409 CONFLICT ("still being processed") at least once, and the 409s met. */
  waitedOnConflict: { sends: number; responses: number };
  /** 2xx answers that were replays (`Idempotent-Replayed: true`). */
  replays: number;
  /** From the first request to the last 2xx (ms). */
  elapsedMs: number;
};

/** An answer no retry can change: the run stops. */
class HarnessError extends Error {}

type Reply = { status: number; headers: http.IncomingHttpHeaders; body: string };

function post(agent: http.Agent, port: number, path: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ agent, host: '127.0.0.1', port, method: 'POST', path, headers: { ...headers, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The message id in a 2xx body of `POST /v1/messages/sms` (`{ data: { id } }`). */
function messageId(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { data?: { id?: string }; id?: string };
    return parsed.data?.id ?? parsed.id;
  } catch {
    return undefined;
  }
}

export async function sendInsisting(opts: {
  /** The port to send to; read before every attempt (a restarted gateway may listen elsewhere). */
  port: () => number;
  keys: readonly string[];
  clients: number;
  total: number;
  /** A prefix for Idempotency-Keys and tags, unique per run. */
  run: string;
  recipients: readonly string[];
  boundMs: number;
  requestTimeoutMs?: number;
  onProgress?: (accepted: number) => void;
  /** Called with the count each time a logical send is answered 2xx (a crash schedule follows it). */
  onAccepted?: (accepted: number) => void;
}): Promise<SendOutcome> {
  const timeoutMs = opts.requestTimeoutMs ?? 10_000;
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.clients });
  const deadline = Date.now() + opts.boundMs;
  const out: SendOutcome = {
    accepted: new Map(), acceptedAttemptAt: new Map(), unanswered: [], requests: 0, failures: {}, retried: 0, waitedOnConflict: { sends: 0, responses: 0 }, replays: 0, elapsedMs: 0,
  };
  const started = Date.now();
  let lastOk = started;
  let next = 0;
  const fail = (cause: string) => { out.failures[cause] = (out.failures[cause] ?? 0) + 1; };
  const progress = opts.onProgress ? setInterval(() => opts.onProgress!(out.accepted.size), 5000) : undefined;

  const client = async (c: number) => {
    const apiKey = opts.keys[c % opts.keys.length]!;
    while (next < opts.total) {
      const i = next++;
      const logical = `${opts.run}-${i}`;
      const body = JSON.stringify({ to: opts.recipients[i % opts.recipients.length], body: `Fault run ${logical}`, metadata: { logical } });
      const headers = { 'X-API-Key': apiKey, 'Content-Type': 'application/json', 'Idempotency-Key': logical };
      let attempts = 0;
      let conflicts = 0;
      for (;;) {
        if (Date.now() > deadline) {
          out.unanswered.push(logical);
          break;
        }
        attempts++;
        out.requests++;
        let wait = 200;
        const attemptAt = Date.now();
        try {
          const r = await post(agent, opts.port(), '/v1/messages/sms', headers, body, timeoutMs);
          if (r.status >= 200 && r.status < 300) {
            const id = messageId(r.body);
            if (!id) throw new HarnessError(`${logical}: 2xx without a message id: ${r.body.slice(0, 200)}`);
            out.accepted.set(logical, id);
            opts.onAccepted?.(out.accepted.size);
            out.acceptedAttemptAt.set(logical, attemptAt);
            if (r.headers['idempotent-replayed'] === 'true') out.replays++;
            lastOk = Date.now();
            break;
          }
          fail(String(r.status));
          if (r.status === 409) conflicts++;
          if (r.status === 409 || r.status === 429 || r.status === 503) {
            const after = Number(r.headers['retry-after']);
            wait = Number.isFinite(after) && after > 0 ? Math.min(after * 1000, 5000) : 1000;
          } else if (r.status < 500) {
            // Any other 4xx is a bug in the harness or the service: it will not change on retry.
            throw new HarnessError(`${logical}: HTTP ${r.status} ${r.body.slice(0, 300)}`);
          }
        } catch (e) {
          if (e instanceof HarnessError) throw e;
          fail('socket');
        }
        await sleep(wait);
      }
      if (attempts > 1) out.retried++;
      if (conflicts > 0) {
        out.waitedOnConflict.sends++;
        out.waitedOnConflict.responses += conflicts;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.clients }, (_, c) => client(c)));
  } finally {
    if (progress) clearInterval(progress);
    agent.destroy();
  }
  out.elapsedMs = lastOk - started;
  return out;
}
