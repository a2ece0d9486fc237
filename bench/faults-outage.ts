/**
 * Scenario 3 of `npm run faults`: the database goes away under load and comes back.
 *
 * The harness owns the cluster: an embedded PostgreSQL (bench/embedded-pg.ts, a child process) in a
 * temporary directory on a free port; the machine's shared server on 5432 is never touched. A
 * `--no-workers` gateway and a `--workers-only` process run on it; closed-loop senders
 * (FAULTS_OUTAGE_CLIENTS) send SMS the whole time. After a warm-up the cluster is stopped (a fast
 * shutdown: connections terminated), kept down FAULTS_OUTAGE_SECONDS, and started again on the same
 * directory and port. The promise: during the outage every answer is prompt (p99 < 2 s) and a 503
 * SERVICE_UNAVAILABLE with Retry-After (no 500, nothing left hanging), /readyz answers 503; after it
 * the same processes serve 2xx again and /readyz is ready within 10 s; every message answered 2xx
 * exists and gets delivered (the workers resume), none sent twice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { answersLine, closedLoop, percentile, poller, summarize, within, type Sample } from './faults-load.ts';
import { benchOrganization, createKeys, fmt, freePort, sleep, table, waitReady, type Child } from './support.ts';

export type OutageResult = {
  outage_seconds: number;
  stop_seconds: number;
  start_seconds: number;
  before: ReturnType<typeof summarize>;
  during: ReturnType<typeof summarize> & { p99_error_ms: number; with_retry_after: number };
  /** Requests sent while the cluster was shutting down (connections being terminated). */
  stopping: ReturnType<typeof summarize>;
  after: ReturnType<typeof summarize>;
  readyz_during: Record<string, number>;
  /** Cluster answering again → first 2xx sent after it answered / first ready /readyz (s). */
  recover_seconds: number | null;
  ready_seconds: number | null;
  answered_2xx: number;
  committed_2xx_missing: number;
  /** Non-2xx answers whose message was committed anyway (a retry with the same Idempotency-Key finds it). */
  committed_but_answered_error: number;
  delivered: number;
  not_terminal: number;
  provider_duplicates: number;
  processes_restarted: number;
  answers_500: number;
  unanswered: number;
  verdict: 'PASS' | 'FAIL';
  why: string[];
};

const isOk = (s: Sample) => s.status >= 200 && s.status < 300;

export async function runOutage(o: {
  outageSeconds: number; clients: number; log: (m: string) => void;
  onCleanup: (name: string, fn: () => Promise<void>) => void;
  startChild: (name: string, args: string[], env: NodeJS.ProcessEnv) => Child;
}): Promise<OutageResult> {
  const { log } = o;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omni-faults-pg-'));
  o.onCleanup(`cluster directory ${dir}`, async () => rmSync(dir, { recursive: true, force: true }));
  const pgPort = await freePort();
  let starts = 0;
  const startCluster = async (): Promise<{ child: Child; url: string }> => {
    const child = o.startChild(`cluster #${++starts}`, ['bench/embedded-pg.ts'], { ...process.env, BENCH_PG_DIR: dir, BENCH_PG_PORT: String(pgPort) });
    const line = await child.waitForLine((l) => l.startsWith('{"url"'), 120_000);
    return { child, url: (JSON.parse(line) as { url: string }).url };
  };
  const cluster = await startCluster();
  const dbUrl = cluster.url;
  log(`outage: own cluster on :${pgPort} (${dir})`);
  const { baseEnv, org, monitor } = await benchOrganization(dbUrl, { log, onCleanup: o.onCleanup });
  monitor.on('error', () => { /* the cluster goes away on purpose */ });
  const port = await freePort();
  const gateway = o.startChild('outage gateway', ['src/main.ts', '--no-workers'], { ...baseEnv, PORT: String(port), HOST: '127.0.0.1' });
  await waitReady(gateway, port, '/readyz');
  const workers = o.startChild('outage workers', ['src/main.ts', '--workers-only'], {
    ...baseEnv, SANDBOX_SEND_LATENCY_MS: '5', SANDBOX_DELIVERED_AFTER_MS: '200', SANDBOX_READ_AFTER_MS: '0',
  });
  const keys = await createKeys(port, org.test_api_key, o.clients);
  await sleep(2000);

  const run = `d${process.pid}`;
  const load = closedLoop({ port: () => port, keys, clients: o.clients, run, pauseMs: 20 });
  const ready = poller(() => port, '/readyz', 250);
  const t0 = Date.now();
  await sleep(5000);
  const stopBegin = Date.now();
  log('outage: stopping the cluster');
  await cluster.child.stop();
  const down = Date.now();
  log(`outage: cluster down (stop took ${fmt((down - stopBegin) / 1000)} s); ${o.outageSeconds} s without a database`);
  await sleep(o.outageSeconds * 1000);
  const startBegin = Date.now();
  await startCluster();
  const up = Date.now();
  log(`outage: cluster answering again (start took ${fmt((up - startBegin) / 1000)} s)`);
  // Until the service answers 2xx and /readyz is ready again (at most 30 s), then 5 s more.
  const bound = up + 30_000;
  while (Date.now() < bound) {
    const ok = load.samples.some((s) => s.at >= up && isOk(s));
    const isReady = ready.log.some((r) => r.at >= up && r.status === 200);
    if (ok && isReady) break;
    await sleep(200);
  }
  await sleep(5000);
  await load.stop();
  ready.stop();
  const end = Date.now();

  const samples = load.samples;
  const duringSamples = within(samples, down, startBegin);
  const errors = duringSamples.filter((s) => !isOk(s));
  const firstOk = samples.filter((s) => s.at >= up && isOk(s)).map((s) => s.at + s.ms).sort((a, b) => a - b)[0];
  const firstReady = ready.log.filter((r) => r.at >= up && r.status === 200).map((r) => r.at).sort((a, b) => a - b)[0];
  const readyDuring: Record<string, number> = {};
  for (const r of ready.log.filter((x) => x.at >= down + 500 && x.at < startBegin)) readyDuring[String(r.status)] = (readyDuring[String(r.status)] ?? 0) + 1;

  // What the database holds, once the load is over and the workers had time to deliver.
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const named = samples.filter(isOk).map((s) => s.id!);
  const drainUntil = Date.now() + 90_000;
  let statuses: { status: string; n: number }[];
  for (;;) {
    statuses = (await db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages where id = any($1::text[]) group by status', [named])).rows;
    const pending = statuses.filter((r) => !['delivered', 'failed', 'read'].includes(r.status)).reduce((a, r) => a + r.n, 0);
    if (pending === 0 || Date.now() > drainUntil) break;
    await sleep(1000);
  }
  const found = statuses.reduce((a, r) => a + r.n, 0);
  const { rows: [dup] } = await db.query<{ n: number }>(
    'select count(*)::int as n from (select idempotency_key from sandbox_sends where idempotency_key = any($1::text[]) group by 1 having count(*) > 1) d', [named]);
  const failedLogicals = samples.filter((s) => !isOk(s)).map((s) => s.logical);
  const { rows: [committedAnyway] } = await db.query<{ n: number }>(`select count(*)::int as n from messages where metadata->>'logical' = any($1::text[])`, [failedLogicals]);
  await db.end();

  const delivered = statuses.filter((r) => r.status === 'delivered' || r.status === 'read').reduce((a, r) => a + r.n, 0);
  const notTerminal = statuses.filter((r) => !['delivered', 'failed', 'read'].includes(r.status)).reduce((a, r) => a + r.n, 0);
  const restarted = [gateway, workers].filter((c) => c.proc.exitCode !== null || c.proc.signalCode !== null).length;
  const during = {
    ...summarize(duringSamples, (startBegin - down) / 1000),
    p99_error_ms: Math.round(percentile(errors.map((s) => s.ms), 99) * 10) / 10,
    with_retry_after: errors.filter((s) => s.status === 503 && s.retryAfter !== undefined).length,
  };
  const answers500 = samples.filter((s) => s.status === 500).length;
  const unanswered = samples.filter((s) => s.status === -1).length;
  const recoverSeconds = firstOk === undefined ? null : Math.round((firstOk - up) / 100) / 10;
  const readySeconds = firstReady === undefined ? null : Math.round((firstReady - up) / 100) / 10;
  const why: string[] = [];
  if (!(during.p99_error_ms < 2000)) why.push(`p99 of error answers during the outage ${during.p99_error_ms} ms ≥ 2 s`);
  if (errors.some((s) => s.status !== 503 || s.code !== 'SERVICE_UNAVAILABLE' || s.retryAfter === undefined)) why.push(`answers other than 503 SERVICE_UNAVAILABLE with Retry-After during the outage: ${answersLine(during.by_answer)}`);
  if (answers500 > 0) why.push(`${answers500} answers 500`);
  if (unanswered > 0) why.push(`${unanswered} requests unanswered within 10 s`);
  if (Object.keys(readyDuring).some((k) => k !== '503')) why.push(`/readyz during the outage: ${answersLine(readyDuring)}`);
  if (recoverSeconds === null || recoverSeconds > 10) why.push(`no 2xx within 10 s of the database's return (${recoverSeconds ?? 'none'})`);
  if (readySeconds === null || readySeconds > 10) why.push(`/readyz not ready within 10 s of the database's return (${readySeconds ?? 'never'})`);
  if (found !== named.length) why.push(`${named.length - found} messages answered 2xx are missing`);
  if (notTerminal > 0) why.push(`${notTerminal} accepted messages not delivered within 90 s after the load (workers did not resume)`);
  if (dup!.n > 0) why.push(`${dup!.n} messages sent twice`);
  if (restarted > 0) why.push(`${restarted} service processes exited`);
  log(`outage: load ${fmt((end - t0) / 1000)} s, ${samples.length} answers`);
  return {
    outage_seconds: Math.round((startBegin - down) / 100) / 10, stop_seconds: Math.round((down - stopBegin) / 100) / 10, start_seconds: Math.round((up - startBegin) / 100) / 10,
    before: summarize(within(samples, t0, stopBegin), (stopBegin - t0) / 1000), stopping: summarize(within(samples, stopBegin, down), Math.max(0.1, (down - stopBegin) / 1000)),
    during, after: summarize(within(samples, up, end), (end - up) / 1000), readyz_during: readyDuring,
    recover_seconds: recoverSeconds, ready_seconds: readySeconds, answered_2xx: named.length, committed_2xx_missing: named.length - found,
    committed_but_answered_error: committedAnyway!.n, delivered, not_terminal: notTerminal, provider_duplicates: dup!.n,
    processes_restarted: restarted, answers_500: answers500, unanswered, verdict: why.length ? 'FAIL' : 'PASS', why,
  };
}

export function outageReport(r: OutageResult, clients: number): string[] {
  return [
    `scenario 3 — database outage under load (own embedded cluster stopped ${fmt(r.outage_seconds)} s, ${clients} closed-loop senders): ${r.verdict}`,
    table([
      ['figure', 'value'],
      ['before: answers', `${answersLine(r.before.by_answer)} (${r.before.ok_per_second}/s, p99 ${fmt(r.before.p99_ok_ms)} ms)`],
      ['cluster stop (fast shutdown) took', `${fmt(r.stop_seconds)} s; answers meanwhile: ${answersLine(r.stopping.by_answer)}`],
      ['during: answers by code', answersLine(r.during.by_answer)],
      ['during: p99 / max of error answers', `${fmt(r.during.p99_error_ms)} / ${fmt(r.during.max_ms)} ms`],
      ['during: 503 with Retry-After', String(r.during.with_retry_after)],
      ['during: /readyz', answersLine(r.readyz_during)],
      ['cluster start took', `${fmt(r.start_seconds)} s`],
      ['time to recover: first 2xx / /readyz ready', `${r.recover_seconds ?? 'never'} s / ${r.ready_seconds ?? 'never'} s after the database answered`],
      ['after: answers', `${answersLine(r.after.by_answer)} (p99 ${fmt(r.after.p99_ok_ms)} ms)`],
      ['500s / unanswered (10 s)', `${r.answers_500} / ${r.unanswered}`],
      ['answered 2xx / missing', `${r.answered_2xx} / ${r.committed_2xx_missing}`],
      ['errors whose message was committed anyway', String(r.committed_but_answered_error)],
      ['delivered after the outage / not terminal', `${r.delivered} / ${r.not_terminal}`],
      ['sent twice (sandbox_sends)', String(r.provider_duplicates)],
      ['service processes restarted', String(r.processes_restarted)],
    ]),
    ...r.why.map((w) => `  FAIL: ${w}`),
    '',
  ];
}
