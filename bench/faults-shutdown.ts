/**
 * Scenario 8 of `npm run faults`: graceful shutdown under load. Clients with Idempotency-Key send
 * (retrying failures with the same key, as in scenario 2) while the gateway and the workers process
 * are each stopped with SIGTERM (drain) and restarted, again and again. The promise: every drain
 * ends by itself (exit 0, before the harness's 12 s SIGKILL), no request is answered 500, every
 * logical send exists exactly once and is delivered, and the provider sent each message once.
 */
import type pg from 'pg';
import { sendInsisting } from './faults-clients.ts';
import { RECIPIENTS } from './faults-load.ts';
import { answersLine } from './faults-load.ts';
import { fmt, sleep, table, type Child } from './support.ts';

export type ShutdownResult = {
  logical_sends: number; answered_2xx: number; unanswered: number;
  gateway_stops: number; workers_stops: number;
  /** Drain times (s) and how each stopped process ended. */
  gateway_drain_seconds: number[]; workers_drain_seconds: number[]; exits: Record<string, number>;
  failed_attempts: Record<string, number>;
  exactly_once: number; duplicated: number; missing: number;
  delivered: number; not_terminal: number; provider_sends: number; provider_duplicates: number;
  seconds_to_deliver_all: number | null;
  verdict: 'PASS' | 'FAIL'; why: string[];
};

export async function runShutdown(o: {
  db: pg.Client; keys: readonly string[]; clients: number; sends: number; stops: number; log: (m: string) => void;
  gatewayPort: () => number; gateway: () => Child; restartGateway: () => Promise<void>; spawnWorkers: () => Child;
}): Promise<ShutdownResult> {
  const { log, db } = o;
  const run = `s${process.pid}`;
  // A SIGTERM during start-up ends the process by the signal's default action (main.ts installs
  // its drain once started); the stoppers let a process run STARTUP_MS first, so they test the drain.
  // The stop waits for the process's first log line too ('starting': main.ts has its handlers):
  // on a slow, loaded machine loading its modules took longer than STARTUP_MS, and the signal
  // ended the process by its default action (session 16).
  const STARTUP_MS = 6000;
  const spawnWorkers = () => {
    const child = o.spawnWorkers();
    return { child, handling: child.waitForLine((l) => l.includes('"msg":"starting"'), 120_000).then(() => undefined, () => undefined) };
  };
  let { child: workers, handling: workersHandling } = spawnWorkers();
  let workersSpawnedAt = Date.now();
  const exits: Record<string, number> = {};
  const gatewayDrains: number[] = [];
  const workersDrains: number[] = [];
  const stopTimed = async (child: Child, into: number[]) => {
    const t = Date.now();
    await child.stop();
    into.push(Math.round((Date.now() - t) / 100) / 10);
    const how = child.proc.signalCode ? `killed (${child.proc.signalCode})` : `exit ${child.proc.exitCode}`;
    exits[how] = (exits[how] ?? 0) + 1;
    // What the process said last, to tell a drain that hung from a signal that arrived unhandled.
    if (how !== 'exit 0') log(`shutdown: ${child.name} ended ${how} after ${into.at(-1)} s; its last output:\n${child.tail()}`);
  };
  let stop = false;
  let gatewayStops = 0;
  let workersStops = 0;
  const gatewayStopper = (async () => {
    while (!stop && gatewayStops < o.stops) {
      await sleep(1500 + Math.random() * 1500);
      if (stop) break;
      await stopTimed(o.gateway(), gatewayDrains);
      gatewayStops++;
      log(`shutdown: gateway SIGTERM #${gatewayStops} drained in ${gatewayDrains.at(-1)} s; restarting`);
      await o.restartGateway();
    }
  })();
  const workersStopper = (async () => {
    while (!stop && workersStops < o.stops) {
      await workersHandling;
      await sleep(Math.max(0, workersSpawnedAt + STARTUP_MS - Date.now()) + Math.random() * 2000);
      if (stop) break;
      await stopTimed(workers, workersDrains);
      workersStops++;
      log(`shutdown: workers SIGTERM #${workersStops} drained in ${workersDrains.at(-1)} s; restarting`);
      ({ child: workers, handling: workersHandling } = spawnWorkers());
      workersSpawnedAt = Date.now();
    }
  })();
  const started = Date.now();
  const sent = await sendInsisting({ port: o.gatewayPort, keys: o.keys, clients: o.clients, total: o.sends, run, recipients: RECIPIENTS, boundMs: 180_000 });
  // Keep stopping the workers while they deliver, then let the last one finish.
  await gatewayStopper;
  await workersStopper;
  stop = true;

  const ids = [...sent.accepted.values()];
  const deadline = Date.now() + 120_000;
  let deliveredAt: number | null = null;
  let rows: { status: string; n: number }[];
  for (;;) {
    rows = (await db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages where id = any($1::text[]) group by 1', [ids])).rows;
    const pending = rows.filter((r) => !['delivered', 'read', 'failed'].includes(r.status)).reduce((a, r) => a + r.n, 0);
    if (pending === 0) {
      deliveredAt = Date.now();
      break;
    }
    if (Date.now() > deadline) break;
    await sleep(500);
  }
  await workers.stop();
  const { rows: made } = await db.query<{ logical: string; n: number }>(
    `select metadata->>'logical' as logical, count(*)::int as n from messages where metadata->>'logical' like $1 group by 1`, [`${run}-%`]);
  const perLogical = new Map(made.map((r) => [r.logical, r.n]));
  let exactlyOnce = 0;
  let duplicated = 0;
  let missing = 0;
  for (let i = 0; i < o.sends; i++) {
    const n = perLogical.get(`${run}-${i}`) ?? 0;
    if (n === 1) exactlyOnce++;
    else if (n === 0) missing++;
    else duplicated++;
  }
  const { rows: [sends] } = await db.query<{ n: number; dup: number }>(
    `select count(*)::int as n, (count(*) - count(distinct idempotency_key))::int as dup from sandbox_sends where idempotency_key = any($1::text[])`, [ids]);
  const delivered = rows.filter((r) => r.status === 'delivered' || r.status === 'read').reduce((a, r) => a + r.n, 0);
  const notTerminal = rows.filter((r) => !['delivered', 'read', 'failed'].includes(r.status)).reduce((a, r) => a + r.n, 0);
  const why: string[] = [];
  if (sent.unanswered.length) why.push(`${sent.unanswered.length} sends never answered 2xx`);
  if (duplicated || missing) why.push(`${duplicated} logical sends duplicated, ${missing} missing`);
  if (notTerminal) why.push(`${notTerminal} messages not terminal 120 s after the load`);
  if (delivered !== ids.length) why.push(`${ids.length - delivered} accepted messages not delivered`);
  if (sends!.dup) why.push(`${sends!.dup} second provider sends`);
  if (sent.failures['500']) why.push(`${sent.failures['500']} answers 500`);
  if (Object.keys(exits).some((k) => k !== 'exit 0')) why.push(`a drain did not end by itself: ${answersLine(exits)}`);
  return {
    logical_sends: o.sends, answered_2xx: sent.accepted.size, unanswered: sent.unanswered.length, gateway_stops: gatewayStops, workers_stops: workersStops,
    gateway_drain_seconds: gatewayDrains, workers_drain_seconds: workersDrains, exits, failed_attempts: sent.failures,
    exactly_once: exactlyOnce, duplicated, missing, delivered, not_terminal: notTerminal, provider_sends: sends!.n, provider_duplicates: sends!.dup,
    seconds_to_deliver_all: deliveredAt === null ? null : Math.round((deliveredAt - started) / 100) / 10,
    verdict: why.length ? 'FAIL' : 'PASS', why,
  };
}

export function shutdownReport(r: ShutdownResult, clients: number): string[] {
  return [
    `scenario 8 — graceful shutdown under load (${clients} clients with Idempotency-Key; SIGTERM to the gateway ${r.gateway_stops}× and the workers ${r.workers_stops}×, each restarted): ${r.verdict}`,
    table([
      ['figure', 'value'],
      ['logical sends / answered 2xx / unanswered', `${r.logical_sends} / ${r.answered_2xx} / ${r.unanswered}`],
      ['gateway drains (s)', r.gateway_drain_seconds.map((s) => fmt(s)).join(' ') || '-'],
      ['workers drains (s)', r.workers_drain_seconds.map((s) => fmt(s)).join(' ') || '-'],
      ['how the stopped processes ended', answersLine(r.exits)],
      ['failed attempts (retried with the same key)', answersLine(r.failed_attempts)],
      ['made exactly once / duplicated / missing', `${r.exactly_once} / ${r.duplicated} / ${r.missing}`],
      ['delivered / not terminal', `${r.delivered} / ${r.not_terminal}`],
      ['provider sends / second sends', `${r.provider_sends} / ${r.provider_duplicates}`],
      ['first request → all delivered', r.seconds_to_deliver_all === null ? 'not drained' : `${fmt(r.seconds_to_deliver_all)} s`],
    ]),
    ...r.why.map((w) => `  FAIL: ${w}`),
    '',
  ];
}
