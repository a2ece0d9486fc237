/**
 * Scenario 1 of `npm run faults`: the workers process is killed (SIGKILL) during delivery, again and
 * again, and restarted; afterwards every message must reach a terminal status, the sandbox provider
 * must have sent each at most once, and no delivery or report job may be left active with an
 * expired lease.
 */
import type pg from 'pg';
import type { Child } from './support.ts';
import { sleep } from './support.ts';

const DELIVER_JOB = 'messaging.deliver';
const STATUS_REPORT_JOB = 'messaging.status-report';
const QUEUES = [DELIVER_JOB, STATUS_REPORT_JOB];
const TERMINAL = ['delivered', 'failed', 'read'];

export type WorkerCrashOptions = {
  db: pg.Client;
  ids: readonly string[];
  crashes: number;
  /** A kill lands at a random moment up to this long after the restarted process began sending. */
  killSpreadMs: number;
  drainTimeoutSeconds: number;
  /** No status or job change for this long, with nothing left that could change one: the drain is over. */
  quietSeconds: number;
  spawnWorkers: () => Child;
  log: (msg: string) => void;
};

export type WorkerCrashResult = {
  messages: number;
  crashes: number;
  /** Jobs active in the messaging queues at each kill (the killed worker's, plus any earlier ones not yet handed back). */
  strandedAtKills: number[];
  /** Kills that landed before the restarted process had sent anything (start-up crashes). */
  killsBeforeProgress: number;
  statuses: Record<string, number>;
  nonTerminal: number;
  providerSends: number;
  /** Messages whose recorded provider id differs from the provider's record (a second send). */
  duplicates: number;
  /** Messages marked sent/delivered that the provider never recorded. */
  lost: number;
  /** Messaging jobs still active with a lease that expired more than `graceSeconds` ago. */
  stuckJobs: number;
  /** Messaging jobs not finished at the end (created, retry or active), by state. */
  pendingJobs: Record<string, number>;
  /** Jobs that expired (lease timed out) and were retried or failed: pg-boss's "job timed out". */
  timedOutJobs: number;
  /** First worker spawn → the end of the drain (s); `drained` says whether every message got terminal. */
  drainSeconds: number;
  drained: boolean;
  /** Last kill → every message terminal (s), null when not drained. */
  recoverySeconds: number | null;
  endReason: string;
  workerLogLines: { warn: number; error: number };
  sampleWarning: string | undefined;
};

async function progress(db: pg.Client, ids: readonly string[]): Promise<{ signature: string; nonTerminal: number; sends: number; pending: number }> {
  // One client runs one query at a time (pg deprecates queuing them with Promise.all).
  const m = await db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages where id = any($1::text[]) group by status order by status', [ids]);
  const { rows: [s] } = await db.query<{ n: number }>('select count(*)::int as n from sandbox_sends where idempotency_key = any($1::text[])', [ids]);
  const j = await db.query<{ state: string; n: number }>(
    `select state::text, count(*)::int as n from pgboss.job where name = any($1::text[]) and state < 'completed' group by state order by state`, [QUEUES]);
  // The sandbox's reports not yet applied (rows of its timeline, messaging.timeline.ts) count as pending work too.
  const { rows: [reports] } = await db.query<{ n: number }>('select count(*)::int as n from messaging_sandbox_reports where message_id = any($1::text[])', [ids]);
  j.rows.push({ state: 'report', n: reports!.n });
  // So do deliveries not yet sent (rows of messaging's delivery queue, messaging.queue.ts).
  const { rows: [deliveries] } = await db.query<{ n: number }>('select count(*)::int as n from messaging_deliveries where message_id = any($1::text[])', [ids]);
  j.rows.push({ state: 'delivery', n: deliveries!.n });
  const nonTerminal = m.rows.filter((r) => !TERMINAL.includes(r.status)).reduce((a, r) => a + r.n, 0);
  const sig = (rows: { n: number }[], key: (r: never) => string) => rows.map((r) => `${key(r as never)}:${r.n}`).join(',');
  return {
    signature: `${sig(m.rows, (r: { status: string }) => r.status)}|${s!.n}|${sig(j.rows, (r: { state: string }) => r.state)}`,
    nonTerminal, sends: s!.n, pending: j.rows.reduce((a, r) => a + r.n, 0),
  };
}

/** Runs the queries one after the other (one client) and answers their results in order. */
async function sequence<T extends readonly (() => Promise<unknown>)[]>(queries: T): Promise<{ [K in keyof T]: Awaited<ReturnType<T[K]>> }> {
  const out: unknown[] = [];
  for (const q of queries) out.push(await q());
  return out as { [K in keyof T]: Awaited<ReturnType<T[K]>> };
}

/** Kills and restarts the workers `crashes` times during delivery, then lets the last one drain. */
export async function runWorkerCrashes(o: WorkerCrashOptions): Promise<WorkerCrashResult> {
  const { db, ids, log } = o;
  const started = Date.now();
  const strandedAtKills: number[] = [];
  let killsBeforeProgress = 0;
  let workers = o.spawnWorkers();
  let lastKill = started;
  const logLines = { warn: 0, error: 0 };
  let sampleWarning: string | undefined;
  const retire = (child: Child) => {
    logLines.warn += child.logLines.warn;
    logLines.error += child.logLines.error;
    sampleWarning ??= child.sampleWarning();
  };

  for (let k = 0; k < o.crashes; k++) {
    const before = await progress(db, ids);
    if (before.nonTerminal === 0) {
      log(`workers: every message is terminal after ${k} crashes; no more kills`);
      break;
    }
    // Wait until this process has done something (a send, a status change or a job moved), then
    // kill it at a random moment within the spread: kills land during delivery, not only at start-up.
    const waitUntil = Date.now() + 30_000;
    let moved = false;
    while (Date.now() < waitUntil && workers.proc.exitCode === null) {
      await sleep(100);
      if ((await progress(db, ids)).signature !== before.signature) {
        moved = true;
        break;
      }
    }
    if (!moved) killsBeforeProgress++;
    // On a fast machine the backlog drained before every kill had landed (session 12: 19 of 20
    // with a 1.5-s spread): at the rate so far (restarts included), shrink the spread so the kills
    // left fit in the delivery time left.
    const delivered = ids.length - before.nonTerminal;
    const msLeft = delivered > 0 ? before.nonTerminal / (delivered / (Date.now() - started)) : Infinity;
    await sleep(Math.random() * Math.min(o.killSpreadMs, msLeft / (o.crashes - k + 1)));
    // Active jobs, and claimed rows of the delivery queue (attempted, their lease not lapsed).
    const { rows: [active] } = await db.query<{ n: number }>(
      `select (select count(*)::int from pgboss.job where name = any($1::text[]) and state = 'active')
            + (select count(*)::int from messaging_deliveries where attempts > 0 and due_at > now()) as n`, [QUEUES]);
    workers.proc.kill('SIGKILL');
    await workers.exited;
    lastKill = Date.now();
    strandedAtKills.push(active!.n);
    retire(workers);
    log(`workers: kill -9 #${k + 1} (pid ${workers.proc.pid}); ${active!.n} messaging jobs or delivery claims were active`);
    workers = o.spawnWorkers();
  }

  // Drain with the last process: until every message is terminal, nothing can change any more, or the bound.
  const deadline = started + o.drainTimeoutSeconds * 1000;
  let previous = '';
  let lastChange = Date.now();
  let lastLog = 0;
  let endReason = 'bound reached';
  let drainedAt: number | null = null;
  for (;;) {
    const p = await progress(db, ids);
    const now = Date.now();
    if (p.signature !== previous) {
      previous = p.signature;
      lastChange = now;
    }
    if (p.nonTerminal === 0) {
      drainedAt = now;
      endReason = 'every message terminal';
      break;
    }
    if (p.pending === 0 && now - lastChange >= o.quietSeconds * 1000) {
      endReason = `no job left that could change the ${p.nonTerminal} non-terminal messages (quiet for ${o.quietSeconds} s)`;
      break;
    }
    if (now >= deadline) break;
    if (workers.proc.exitCode !== null) throw new Error(`the workers process exited by itself:\n${workers.tail()}`);
    if (now - lastLog >= 10_000) {
      lastLog = now;
      log(`workers: drain ${((now - started) / 1000).toFixed(0)} s: ${p.nonTerminal} non-terminal, ${p.sends} provider sends, ${p.pending} jobs pending (${previous})`);
    }
    await sleep(250);
  }
  const endedAt = Date.now();

  const [statusRows, sends, dup, lost, stuck, pending, timedOut] = await sequence([
    () => db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages where id = any($1::text[]) group by status', [ids]),
    () => db.query<{ n: number }>('select count(*)::int as n from sandbox_sends where idempotency_key = any($1::text[])', [ids]),
    () => db.query<{ n: number }>(
      `select count(*)::int as n from messages m join sandbox_sends s on s.idempotency_key = m.id
        where m.id = any($1::text[]) and m.provider_message_id is not null and m.provider_message_id <> s.provider_message_id`, [ids]),
    () => db.query<{ n: number }>(
      `select count(*)::int as n from messages m where m.id = any($1::text[]) and m.status <> 'queued' and m.status <> 'failed'
          and not exists (select 1 from sandbox_sends s where s.idempotency_key = m.id)`, [ids]),
    () => db.query<{ n: number }>(
      `select count(*)::int as n from pgboss.job where name = any($1::text[]) and state = 'active'
          and started_on + expire_seconds * interval '1s' < now() - interval '60 seconds'`, [QUEUES]),
    () => db.query<{ state: string; n: number }>(`select state::text, count(*)::int as n from pgboss.job where name = any($1::text[]) and state < 'completed' group by state`, [QUEUES]),
    () => db.query<{ n: number }>(`select count(*)::int as n from pgboss.job where name = any($1::text[]) and output->>'message' = 'job timed out'`, [QUEUES]),
  ] as const);
  await workers.stop();
  retire(workers);
  const statuses = Object.fromEntries(statusRows.rows.map((r) => [r.status, r.n]));
  return {
    messages: ids.length, crashes: strandedAtKills.length, strandedAtKills, killsBeforeProgress, statuses,
    nonTerminal: statusRows.rows.filter((r) => !TERMINAL.includes(r.status)).reduce((a, r) => a + r.n, 0),
    providerSends: sends.rows[0]!.n, duplicates: dup.rows[0]!.n, lost: lost.rows[0]!.n, stuckJobs: stuck.rows[0]!.n,
    pendingJobs: Object.fromEntries(pending.rows.map((r) => [r.state, r.n])), timedOutJobs: timedOut.rows[0]!.n,
    drainSeconds: ((drainedAt ?? endedAt) - started) / 1000, drained: drainedAt !== null,
    recoverySeconds: drainedAt === null ? null : (drainedAt - lastKill) / 1000,
    endReason, workerLogLines: logLines, sampleWarning,
  };
}
