/**
 * Scenario 5 of `npm run faults`: two gateways (A, B: `--no-workers`) and two workers processes
 * over one database.
 * - Plan rate limits hold globally: a starter key's `POST /v1/messages/sms` allows 30 per minute;
 *   60 requests (2×) alternate between A and B inside one window → exactly 30 accepted. Run on the
 *   PostgreSQL counters, then again with both gateways on Redis counters (REDIS_URL) when Redis
 *   answers on 127.0.0.1:6379.
 * - A graphql-ws subscription on A sees the `message.queued` event of every message sent through B.
 * - Every job runs once: those messages are delivered by the two workers processes, each sent once
 *   by the provider (sandbox_sends).
 * - A scheduled job fires once per tick: a flow with the schedule trigger `* * * * *` (pg-boss
 *   schedule, one timekeeper per workers process) has one execution per minute.
 */
import { createClient } from 'graphql-ws';
import type pg from 'pg';
import WebSocket from 'ws';
import { sendInsisting } from './faults-clients.ts';
import { RECIPIENTS } from './faults-load.ts';
import { answers, call, fmt, freePort, runNode, sleep, table, waitReady, type Child } from './support.ts';

type Gateway = { child: Child; port: number };
export type RateRound = { store: string; offered: number; limit: number; accepted: number; refused: number; other: Record<string, number> };
export type InstancesResult = {
  rate_limits: RateRound[];
  subscription: { sent_on_b: number; events_seen_on_a: number; missing: number; seconds_to_last_event: number | null };
  jobs: { messages: number; delivered: number; not_terminal: number; provider_sends: number; second_sends: number };
  schedule: { minutes_watched: number; executions: number; ticks: number; most_in_one_tick: number };
  verdict: 'PASS' | 'FAIL'; why: string[];
};

async function newOrg(env: NodeJS.ProcessEnv, plan: string): Promise<{ organization_id: string; test_api_key: string }> {
  const out = await runNode(['src/admin.ts', 'org', 'create', '--name', `Faults ${plan}`, '--plan', plan, '--json'], env);
  return JSON.parse(out.trim().split('\n').pop()!) as { organization_id: string; test_api_key: string };
}

/** 2× the starter SMS limit, alternating A/B, 3 per second, inside one minute window. */
async function rateRound(store: string, a: Gateway, b: Gateway, key: string, log: (m: string) => void): Promise<RateRound> {
  const limit = 30;
  const offered = 2 * limit;
  // Windows are aligned to the minute: start early in one so all requests (20 s) fall into it.
  const second = new Date().getUTCSeconds();
  if (second > 30) await sleep((61 - second) * 1000);
  const statuses: number[] = [];
  const pending: Promise<void>[] = [];
  for (let i = 0; i < offered; i++) {
    const g = i % 2 ? a : b;
    pending.push(call(g.port, 'POST', '/v1/messages/sms', { 'X-API-Key': key, 'Content-Type': 'application/json' },
      JSON.stringify({ to: RECIPIENTS[i % RECIPIENTS.length], body: `rate ${store} ${i}` })).then((r) => { statuses.push(r.status); }, () => { statuses.push(0); }));
    await sleep(333);
  }
  await Promise.all(pending);
  const other: Record<string, number> = {};
  for (const s of statuses.filter((x) => x !== 201 && x !== 429)) other[String(s)] = (other[String(s)] ?? 0) + 1;
  const r = { store, offered, limit, accepted: statuses.filter((s) => s === 201).length, refused: statuses.filter((s) => s === 429).length, other };
  log(`instances: rate limit on ${store}: ${r.accepted} accepted, ${r.refused} refused of ${offered}`);
  return r;
}

export async function runInstances(o: {
  baseEnv: NodeJS.ProcessEnv; db: pg.Client; keys: readonly string[]; ownerKey: string; messages: number; minutes: number; log: (m: string) => void;
  startChild: (name: string, args: string[], env: NodeJS.ProcessEnv) => Child;
}): Promise<InstancesResult> {
  const { log, db } = o;
  const why: string[] = [];
  let n = 0;
  const startGateway = async (name: string, extra: NodeJS.ProcessEnv = {}): Promise<Gateway> => {
    const port = await freePort();
    const child = o.startChild(`gateway ${name} #${++n}`, ['src/main.ts', '--no-workers'], { ...o.baseEnv, PORT: String(port), HOST: '127.0.0.1', ...extra });
    await waitReady(child, port, '/readyz');
    return { child, port };
  };
  const workerEnv = { ...o.baseEnv, SANDBOX_SEND_LATENCY_MS: '5', SANDBOX_DELIVERED_AFTER_MS: '200', SANDBOX_READ_AFTER_MS: '0' };
  const workers = [o.startChild('workers 1', ['src/main.ts', '--workers-only'], workerEnv), o.startChild('workers 2', ['src/main.ts', '--workers-only'], workerEnv)];
  let [a, b] = await Promise.all([startGateway('A'), startGateway('B')]);
  log(`instances: gateways A :${a!.port}, B :${b!.port}; two workers processes`);

  // The scheduled flow (every minute) — counted at the end.
  const flow = await call(a!.port, 'POST', '/v1/flows', { 'X-API-Key': o.ownerKey, 'Content-Type': 'application/json' }, JSON.stringify({
    name: 'Faults tick', trigger: { type: 'schedule', cron: '* * * * *' },
    definition: { nodes: [{ id: 'start', type: 'trigger' }, { id: 'done', type: 'end' }], edges: [{ from: 'start', to: 'done' }] },
  }));
  if (flow.status !== 201) throw new Error(`creating the scheduled flow: ${flow.status} ${flow.body}`);
  const flowId = (JSON.parse(flow.body) as { data: { id: string } }).data.id;
  const watchFrom = new Date();

  // Subscription on A, messages through B.
  const seen = new Map<string, number>();
  const client = createClient({ url: `ws://127.0.0.1:${a!.port}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: o.ownerKey }, retryAttempts: 0 });
  const dispose = client.subscribe<{ events: { type: string; data: { id?: string; message_id?: string } } }>(
    { query: 'subscription { events(types: ["message.queued"]) { type data } }' },
    { next: (v) => { const d = v.data?.events.data; const id = d?.id ?? d?.message_id; if (id) seen.set(id, Date.now()); }, error: (e) => log(`instances: subscription error ${String(e)}`), complete: () => {} },
  );
  await sleep(1000);
  const started = Date.now();
  const sent = await sendInsisting({ port: () => b!.port, keys: o.keys, clients: 16, total: o.messages, run: `i${process.pid}`, recipients: RECIPIENTS, boundMs: 120_000 });
  const ids = [...sent.accepted.values()];
  const until = Date.now() + 15_000;
  while (Date.now() < until && ids.some((id) => !seen.has(id))) await sleep(200);
  dispose();
  await client.dispose();
  const missingEvents = ids.filter((id) => !seen.has(id)).length;
  const lastEvent = ids.reduce((m, id) => Math.max(m, seen.get(id) ?? 0), 0);
  const subscription = { sent_on_b: ids.length, events_seen_on_a: ids.length - missingEvents, missing: missingEvents, seconds_to_last_event: missingEvents ? null : Math.round((lastEvent - started) / 100) / 10 };
  if (missingEvents) why.push(`${missingEvents} message.queued events caused on B not seen on A`);
  log(`instances: subscription on A saw ${subscription.events_seen_on_a}/${ids.length} events of sends on B`);

  // Jobs once.
  const deadline = Date.now() + 120_000;
  let rows: { status: string; n: number }[];
  for (;;) {
    rows = (await db.query<{ status: string; n: number }>('select status, count(*)::int as n from messages where id = any($1::text[]) group by 1', [ids])).rows;
    if (rows.every((r) => ['delivered', 'read', 'failed'].includes(r.status)) || Date.now() > deadline) break;
    await sleep(500);
  }
  const { rows: [sends] } = await db.query<{ n: number; dup: number }>(
    'select count(*)::int as n, (count(*) - count(distinct idempotency_key))::int as dup from sandbox_sends where idempotency_key = any($1::text[])', [ids]);
  const jobs = {
    messages: ids.length, delivered: rows.filter((r) => r.status === 'delivered' || r.status === 'read').reduce((x, r) => x + r.n, 0),
    not_terminal: rows.filter((r) => !['delivered', 'read', 'failed'].includes(r.status)).reduce((x, r) => x + r.n, 0), provider_sends: sends!.n, second_sends: sends!.dup,
  };
  if (jobs.delivered !== ids.length || jobs.second_sends || jobs.provider_sends !== ids.length) why.push(`jobs: ${JSON.stringify(jobs)}`);

  // Rate limits across both gateways: PostgreSQL counters, then Redis.
  const rate: RateRound[] = [];
  rate.push(await rateRound('PostgreSQL counters', a!, b!, (await newOrg(o.baseEnv, 'starter')).test_api_key, log));
  if (await answers('127.0.0.1', 6379)) {
    await Promise.all([a!.child.stop(), b!.child.stop()]);
    const redis = { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: `faults-${process.pid}-${Date.now()}:` };
    [a, b] = await Promise.all([startGateway('A', redis), startGateway('B', redis)]);
    rate.push(await rateRound('Redis counters', a!, b!, (await newOrg(o.baseEnv, 'starter')).test_api_key, log));
  } else {
    log('instances: no Redis on 127.0.0.1:6379; the Redis round is skipped');
  }
  for (const r of rate) if (r.accepted !== r.limit) why.push(`${r.store}: ${r.accepted} accepted of ${r.offered} (limit ${r.limit})`);

  // Scheduled ticks: watch until `minutes` minute boundaries have passed since the flow was made (and
  // the pg-boss cron monitor, every 30 s, had time to fire the last one).
  const firstTick = Math.ceil(watchFrom.getTime() / 60_000) * 60_000;
  const watchUntil = firstTick + (o.minutes - 1) * 60_000 + 40_000;
  if (Date.now() < watchUntil) log(`instances: waiting ${fmt((watchUntil - Date.now()) / 1000, 0)} s for ${o.minutes} schedule ticks`);
  while (Date.now() < watchUntil) await sleep(1000);
  const { rows: ticks } = await db.query<{ minute: Date; n: number }>(
    `select date_trunc('minute', created_at) as minute, count(*)::int as n from flow_executions where flow_id = $1 group by 1 order by 1`, [flowId]);
  const executions = ticks.reduce((x, r) => x + r.n, 0);
  const schedule = { minutes_watched: o.minutes, executions, ticks: ticks.length, most_in_one_tick: Math.max(0, ...ticks.map((r) => r.n)) };
  if (schedule.most_in_one_tick !== 1 || schedule.ticks < o.minutes) {
    // When each execution started, against when the flow was made: a tick pg-boss fired late (its
    // cron monitor catches up missed occurrences) lands in the next minute beside that minute's own.
    const { rows: at } = await db.query<{ created_at: Date }>('select created_at from flow_executions where flow_id = $1 order by created_at', [flowId]);
    why.push(`schedule: ${JSON.stringify({ ...schedule, watched_from: watchFrom.toISOString(), started_at: at.map((r) => r.created_at.toISOString()) })}`);
  }
  await Promise.all([a!.child.stop(), b!.child.stop(), ...workers.map((w) => w.stop())]);
  return { rate_limits: rate, subscription, jobs, schedule, verdict: why.length ? 'FAIL' : 'PASS', why };
}

export function instancesReport(r: InstancesResult): string[] {
  return [
    `scenario 5 — several instances (gateways A and B, two workers processes, one database): ${r.verdict}`,
    table([
      ['figure', 'value'],
      ...r.rate_limits.map((x) => [`rate limit, ${x.store}: 2× offered across A and B`, `${x.accepted} accepted / ${x.refused} refused 429 of ${x.offered} (limit ${x.limit})${Object.keys(x.other).length ? `, other ${JSON.stringify(x.other)}` : ''}`]),
      ['subscription on A: message.queued of sends on B', `${r.subscription.events_seen_on_a} / ${r.subscription.sent_on_b}${r.subscription.seconds_to_last_event === null ? '' : ` (last ${fmt(r.subscription.seconds_to_last_event)} s after the first send)`}`],
      ['messages delivered by 2 workers / not terminal', `${r.jobs.delivered} / ${r.jobs.not_terminal} of ${r.jobs.messages}`],
      ['provider sends / second sends', `${r.jobs.provider_sends} / ${r.jobs.second_sends}`],
      ['scheduled flow (* * * * *): ticks / executions / most in one tick', `${r.schedule.ticks} / ${r.schedule.executions} / ${r.schedule.most_in_one_tick}`],
    ]),
    ...r.why.map((w) => `  FAIL: ${w}`),
    '',
  ];
}
