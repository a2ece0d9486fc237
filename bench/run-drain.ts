/**
 * The drain phase of `npm run bench` (bench/run.ts, step 4): sandbox SMS accepted through REST while
 * no worker runs, then delivered by a workers-only process while the `messages` table is polled.
 */
import type pg from 'pg';
import { runBatch, type BatchResult } from './load.ts';
import { acceptedRest, smsRestRequest } from './run-scenarios.ts';
import { cpuMark, cpuSince, fmt, procCpuSeconds, sleep, type Child } from './support.ts';

/** The drain stops early when no message changed status for this long (e.g. reports that never come). */
export const DRAIN_STALL_SECONDS = 15;

/** BENCH_DRAIN_MESSAGES, BENCH_DRAIN_CONCURRENCY, BENCH_DRAIN_TIMEOUT_SECONDS, and the accepting connections (BENCH_MESSAGING_CONNECTIONS). */
export type DrainConfig = {
  messages: number; concurrency: number; timeoutSeconds: number; connections: number;
  /** No stall is called before the workers process ran this long (default 20 s; a busy machine starts it slower). */
  startupGraceSeconds?: number;
};

export type StatusCounts = { total: number; queued: number; sent: number; delivered: number; failed: number; other: number };

async function statusCounts(db: pg.Client): Promise<StatusCounts> {
  const { rows } = await db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages group by status');
  const c: StatusCounts = { total: 0, queued: 0, sent: 0, delivered: 0, failed: 0, other: 0 };
  for (const r of rows) {
    c.total += r.n;
    if (r.status === 'queued' || r.status === 'sent' || r.status === 'delivered' || r.status === 'failed') c[r.status] += r.n;
    else c.other += r.n;
  }
  return c;
}

/** "N of max_connections in use (db: n, …)", to explain connection failures on a shared server. */
async function connectionUse(db: pg.Client): Promise<string> {
  try {
    const { rows } = await db.query<{ datname: string | null; n: number; max: string }>(
      `select datname, count(*)::int as n, current_setting('max_connections') as max from pg_stat_activity group by datname order by n desc`);
    const used = rows.reduce((a, r) => a + r.n, 0);
    return `${used} of max_connections ${rows[0]?.max ?? '?'} in use: ${rows.map((r) => `${r.datname ?? '(background)'} ${r.n}`).join(', ')}`;
  } catch (e) {
    return `connection use unknown: ${e instanceof Error ? e.message : String(e)}`;
  }
}

export type Leg = { count: number; seconds: number; rate: number; complete: boolean };
export type DrainResult = {
  requested: number;
  accept: BatchResult;
  rows: number;
  concurrency: number;
  timeoutSeconds: number;
  /** Worker process spawn → first message marked sent (process start, migrations check, pg-boss start). */
  startupSeconds: number | null;
  /** First message sent → all sent (or the bound), and → all delivered (or the bound). */
  sent: Leg;
  delivered: Leg;
  /** Spawn → all delivered, as a user would see it (null when the bound was hit). */
  wallSeconds: number | null;
  final: StatusCounts;
  workerLogLines: { warn: number; error: number };
  workerSampleWarning: string | undefined;
  timedOut: boolean;
  /** No status changed for DRAIN_STALL_SECONDS while messages were still not delivered. */
  stalled: boolean;
  /** CPU ms per drained message (delivered, else sent) of the workers process and of the database backends. */
  cpu: { workers: number; db: number };
};

export async function runDrain(opts: {
  db: pg.Client; database: string | undefined; servicePort: number; keys: string[]; env: NodeJS.ProcessEnv; config: DrainConfig;
  log: (line: string) => void; startChild: (name: string, args: string[], env: NodeJS.ProcessEnv) => Child;
}): Promise<DrainResult> {
  const { db, log, startChild } = opts;
  const { messages: DRAIN_MESSAGES, concurrency: DRAIN_CONCURRENCY, timeoutSeconds: DRAIN_TIMEOUT_SECONDS, connections: MESSAGING_CONNECTIONS } = opts.config;
  const before = await statusCounts(db);
  if (before.total !== 0) throw new Error(`drain: expected an empty messages table, found ${before.total} rows`);

  // 1. Fill the queue through the API while no worker runs (the service is --no-workers).
  log(`drain: accepting ${DRAIN_MESSAGES} SMS through REST (${MESSAGING_CONNECTIONS} connections, service --no-workers)`);
  let lastLog = 0;
  const accept = await runBatch({
    port: opts.servicePort, connections: MESSAGING_CONNECTIONS, total: DRAIN_MESSAGES, request: smsRestRequest(opts.keys), accept: acceptedRest,
    onProgress: (done) => {
      if (Date.now() - lastLog < 5000) return;
      lastLog = Date.now();
      log(`drain: ${done}/${DRAIN_MESSAGES} accepted`);
    },
  });
  log(`drain: ${accept.ok} accepted in ${fmt(accept.elapsedMs / 1000)} s (${fmt(accept.rps, 0)}/s), ${accept.errors} failed`);
  if (accept.ok === 0) throw new Error(`drain: no message was accepted: ${accept.sampleError ?? ''}`);
  const queued = await statusCounts(db);
  if (queued.total !== accept.ok || queued.queued !== queued.total) {
    log(`drain: WARNING: ${accept.ok} accepted but the table holds ${JSON.stringify(queued)}`);
  }
  const rows = queued.total;

  // 2. A workers-only process delivers them; poll the table.
  let spawnedAt = Date.now();
  const dbMark = cpuMark(undefined, opts.database);
  let exitedEarly = false;
  const spawnWorkers = () => {
    const child = startChild('workers', ['src/main.ts', '--workers-only'], {
      ...opts.env,
      SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0', SANDBOX_READ_AFTER_MS: '0',
      MESSAGING_DELIVERY_CONCURRENCY: String(DRAIN_CONCURRENCY),
    });
    exitedEarly = false;
    void child.exited.then(() => { exitedEarly = true; });
    log(`drain: workers-only process started (pid ${child.proc.pid}, concurrency ${DRAIN_CONCURRENCY}); polling every 250 ms, bound ${DRAIN_TIMEOUT_SECONDS} s`);
    return child;
  };
  let workers = spawnWorkers();
  let attempts = 1;
  let deadline = spawnedAt + DRAIN_TIMEOUT_SECONDS * 1000;
  let counts: StatusCounts;
  let timedOut = false;
  let stalled = false;
  let lastProgress = spawnedAt;
  let lastChange = spawnedAt;
  let previous = '';
  for (;;) {
    await sleep(250);
    counts = await statusCounts(db);
    const now = Date.now();
    if (counts.queued === 0 && counts.sent === 0) break;
    if (exitedEarly) {
      // A PostgreSQL shared with other work may have no connection slot left right now: try again.
      if (attempts < 3 && counts.queued === rows && /too many clients/.test(workers.tail())) {
        log(`drain: the workers process found no free PostgreSQL connection (${await connectionUse(db)}); retrying in 5 s`);
        await sleep(5000);
        attempts++;
        workers = spawnWorkers();
        spawnedAt = Date.now();
        deadline = spawnedAt + DRAIN_TIMEOUT_SECONDS * 1000;
        lastProgress = lastChange = spawnedAt;
        continue;
      }
      throw new Error(`drain: the workers process exited (${workers.proc.exitCode}; ${await connectionUse(db)}):\n${workers.tail()}`);
    }
    const signature = JSON.stringify(counts);
    if (signature !== previous) {
      previous = signature;
      lastChange = now;
    }
    if (now >= deadline) {
      timedOut = true;
      break;
    }
    if (now - lastChange >= DRAIN_STALL_SECONDS * 1000 && now - spawnedAt >= (opts.config.startupGraceSeconds ?? 20) * 1000) {
      stalled = true;
      break;
    }
    if (now - lastProgress >= 2000) {
      lastProgress = now;
      log(`drain: ${fmt((now - spawnedAt) / 1000)} s: queued ${counts.queued}, sent ${counts.sent}, delivered ${counts.delivered}, failed ${counts.failed}`);
    }
  }
  const stoppedAt = Date.now();
  // The service's own timestamps (same host clock) make the legs precise; polling only detects the
  // end. Only what happened by `stoppedAt` counts (the workers run on until they are stopped below).
  const { rows: [t] } = await db.query<{ first_sent: Date | null; last_sent: Date | null; last_delivered: Date | null; n_sent: number; n_delivered: number }>(
    `select min(sent_at) as first_sent, max(sent_at) filter (where sent_at <= $1) as last_sent,
            max(delivered_at) filter (where delivered_at <= $1) as last_delivered,
            (count(*) filter (where sent_at <= $1))::int as n_sent, (count(*) filter (where delivered_at <= $1))::int as n_delivered
       from messages`,
    [new Date(stoppedAt)],
  );
  const workersCpu = procCpuSeconds(workers.proc.pid!);
  const dbCpu = cpuSince(dbMark, undefined, opts.database).db;
  const how = timedOut ? 'bound reached' : stalled ? `stalled (no status change for ${DRAIN_STALL_SECONDS} s)` : 'done';
  log(`drain: ${how} after ${fmt((stoppedAt - spawnedAt) / 1000)} s: ${JSON.stringify(counts)}; stopping the workers`);
  await workers.stop();

  const first = t?.first_sent ? t.first_sent.getTime() : null;
  const leg = (count: number, complete: boolean, last: Date | null | undefined): Leg => {
    if (first === null) return { count, seconds: (stoppedAt - spawnedAt) / 1000, rate: 0, complete };
    const end = complete && last ? last.getTime() : stoppedAt;
    const seconds = Math.max(0.001, (end - first) / 1000);
    return { count, seconds, rate: count / seconds, complete };
  };
  const allSent = counts.queued === 0;
  const allDelivered = counts.delivered === rows;
  const drained = t?.n_delivered || t?.n_sent || 0;
  return {
    requested: DRAIN_MESSAGES, accept, rows, concurrency: DRAIN_CONCURRENCY, timeoutSeconds: DRAIN_TIMEOUT_SECONDS,
    startupSeconds: first === null ? null : (first - spawnedAt) / 1000,
    sent: leg(t?.n_sent ?? 0, allSent, t?.last_sent),
    delivered: leg(t?.n_delivered ?? 0, allDelivered, t?.last_delivered),
    wallSeconds: allDelivered && t?.last_delivered ? (t.last_delivered.getTime() - spawnedAt) / 1000 : null,
    final: counts,
    workerLogLines: workers.logLines,
    workerSampleWarning: workers.sampleWarning(),
    timedOut,
    stalled,
    cpu: {
      workers: workersCpu === undefined ? NaN : (workersCpu * 1000) / Math.max(1, drained),
      db: (dbCpu * 1000) / Math.max(1, drained),
    },
  };
}
