/**
 * The bench's event figures (issue 4): webhook deliveries per second to a local receiver,
 * event-to-delivery latency, and subscription event latency against a raw LISTEN/NOTIFY round trip.
 *
 *   setup:   a bare node:http receiver in its own process (bench/webhook-receiver.ts, answers 200 at
 *            once, checks X-Service-Signature); one webhook endpoint `http://127.0.0.1:PORT/hook`,
 *            events `message.*`, created through `POST /v1/webhooks` on the service (which runs with
 *            WEBHOOKS_ALLOW_LOOPBACK=1); per phase a fresh workers-only process (`--workers-only`:
 *            event relay + webhook worker + pg-boss; WEBHOOKS_ALLOW_LOOPBACK=1,
 *            WEBHOOKS_CONCURRENCY=BENCH_WEBHOOKS_CONCURRENCY), probed until it delivers;
 *   latency: BENCH_LATENCY_RATE (50) events/s for BENCH_LATENCY_SECONDS (10), after a 2 s warm-up at
 *            the same rate, each one INSERT into `events` (the outbox the relay dispatches) with
 *            created_at = now; latency = arrival − created_at on the same host clock (created_at is
 *            carried to the microsecond in data.bench_t), at the receiver (webhook delivery) and at a
 *            graphql-ws client subscribed on the service to `events(types: ["message.*"])`; in the
 *            same seconds, interleaved, a raw pg client LISTENs while another NOTIFYs its send time;
 *   burst:   BENCH_WEBHOOK_EVENTS (5,000) events inserted in one statement, so the relay fans out
 *            one delivery each; deliveries/s from the first to the last arrival at the receiver, and
 *            from webhook_deliveries.delivered_at; bounded by BENCH_WEBHOOKS_TIMEOUT_SECONDS (45); with
 *            where the time goes: CPU per delivery of the workers process, the database's backends,
 *            the receiver, the service, kernel interrupts, steal and every other process (/proc), the
 *            CPU-bound ceiling that implies, and transactions, rows and index scans per delivery (the
 *            workers process is stopped before the statistics are read, so its backends flushed).
 * The endpoint is deleted and the workers stopped at the end, so later phases see no webhook work.
 * `node bench/webhooks.ts` runs this phase alone (see `standalone` at the end).
 */
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { newId } from '../src/platform/ids.ts';
import { percentile } from './load.ts';
import type { Child } from './support.ts';

export type WebhookHarness = {
  log(msg: string): void;
  startChild(name: string, args: string[], env: NodeJS.ProcessEnv): Child;
  call(port: number, method: string, path: string, headers?: Record<string, string>, body?: string): Promise<{ status: number; body: string }>;
  /** Starts counting CPU seconds of the process and of the database's backends; the function reads them. */
  cpuMeter(pid: number | undefined, database: string | undefined): () => { proc: number; db: number };
};

export type WebhookOptions = {
  /** Deliveries in the burst; 0 skips it. */
  events: number;
  /** Measured seconds of the steady latency phase (after a 2 s warm-up); 0 skips it. */
  latencySeconds: number;
  latencyRate: number;
  /** Whether the steady phase also measures the graphql-ws subscription and the raw LISTEN/NOTIFY baseline. */
  subscriptions: boolean;
  concurrency: number;
  /** WEBHOOKS_POLL_INTERVAL_MS for the workers; undefined keeps the service default. */
  pollIntervalMs: number | undefined;
  timeoutSeconds: number;
};

const LATENCY_WARMUP_SECONDS = 2;
const STALL_SECONDS = 10;
const WEBHOOK_PATH = '/hook';
export const DELIVERY_TARGET_PER_S = 2000;
export const LATENCY_TARGET_P99_MS = 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * CPU-seconds of the whole machine so far, summed over its CPUs (/proc/stat; NaN elsewhere): busy
 * (user, nice, system, irq, softirq, steal), of which kernel interrupt work (irq + softirq: the
 * loopback network, not charged to any process) and steal (the hypervisor ran another guest), and
 * total (busy + idle + iowait).
 */
function machineCpu(): { busy: number; interrupts: number; steal: number; total: number } {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const busy = user + nice + system + irq + softirq + steal;
    return { busy: busy / 100, interrupts: (irq + softirq) / 100, steal: steal / 100, total: (busy + idle + iowait) / 100 };
  } catch {
    return { busy: NaN, interrupts: NaN, steal: NaN, total: NaN };
  }
}

/** Wall clock to the microsecond, comparable across processes on this host. */
const now = () => performance.timeOrigin + performance.now();

export type LatencyStats = { samples: number; expected: number; missing: number; p50: number; p90: number; p99: number; max: number; mean: number };

function latencyStats(values: number[], expected: number): LatencyStats {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    samples: sorted.length, expected, missing: Math.max(0, expected - sorted.length),
    p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : NaN, mean: sorted.length ? sum / sorted.length : NaN,
  };
}

type Hit = [eventId: string, phase: string, benchT: number, arrival: number, duplicate: 0 | 1];
type ReceiverStats = { hits: Hit[]; badSignatures: number; unsigned: number; unparsable: number };
type DeliveryCounts = { total: number; success: number; pending: number; failed: number; dead: number; cancelled: number };

export type WebhookResult = {
  options: WebhookOptions;
  workersStartupSeconds: number;
  latency?: {
    rate: number;
    seconds: number;
    webhook: LatencyStats;
    subscription?: LatencyStats & { errors: string[] };
    notify?: LatencyStats;
    /** Subscription p99 ÷ LISTEN/NOTIFY p99. */
    ratio?: number;
  };
  burst?: {
    events: number;
    insertSeconds: number;
    /** First → last arrival at the receiver. */
    receiver: { count: number; seconds: number; rate: number };
    /** First → last webhook_deliveries.delivered_at (the service's clock). */
    deliveredAt: { count: number; seconds: number; rate: number };
    /** Insert commit → last arrival: relay fan-out and claiming included. */
    endToEnd: { count: number; seconds: number; rate: number };
    /** The relay's fan-out: the events' first → last webhook_deliveries.created_at (relay batches of up to 500). */
    relay: { count: number; seconds: number; rate: number };
    counts: DeliveryCounts;
    complete: boolean;
    timedOut: boolean;
    stalled: boolean;
    /**
     * CPU ms per delivery over the burst (insert → last arrival): the workers process (relay and
     * delivery worker), this database's backends, the receiver process, the service process (it
     * LISTENs for live notices; NaN unless the caller passed its pid), and everything else the
     * machine ran in that time (the bench itself, other work on the machine): /proc/stat busy time
     * minus the four.
     */
    cpuMsPerDelivery: { workers: number; db: number; receiver: number; service: number; interrupts: number; steal: number; rest: number };
    /** The machine's CPUs and how busy they were over the burst (0–1; NaN off Linux). */
    machine: { cpus: number; busy: number };
    /** Per delivery over the burst: committed + rolled-back transactions (pg_stat_database) and rows by table (pg_stat_user_tables). */
    dbPerDelivery: {
      xacts: number;
      rows: Record<string, { inserted: number; updated: number }>;
      /** Index scans by index (pg_stat_user_indexes): e.g. webhook_deliveries_due_idx counts the worker's claim queries. */
      indexScans: Record<string, number>;
    } | null;
  };
  receiver: { duplicates: number; badSignatures: number; unsigned: number; unparsable: number };
  workerLogLines: { warn: number; error: number };
  workerSampleWarning: string | undefined;
};

export async function runWebhookBench(h: WebhookHarness, opts: WebhookOptions, ctx: {
  db: pg.Client; dbUrl: string; database: string | undefined; servicePort: number; organizationId: string; apiKey: string; env: NodeJS.ProcessEnv;
  /** The service process, to count its CPU during the burst (optional). */
  servicePid?: number | undefined;
}): Promise<WebhookResult> {
  const { log } = h;
  const clients: pg.Client[] = [];
  const connect = async () => {
    const c = new pg.Client({ connectionString: ctx.dbUrl });
    c.on('error', () => {});
    await c.connect();
    clients.push(c);
    return c;
  };
  let ws: Client | undefined;
  let endpointId: string | undefined;
  const receiver = h.startChild('webhook receiver', ['bench/webhook-receiver.ts'], { ...ctx.env, PORT: '0' });
  let workers: ReturnType<WebhookHarness['startChild']> | undefined;
  try {
    const receiverPort = (JSON.parse(await receiver.waitForLine((l) => l.startsWith('{"listening"'), 30_000)) as { listening: number }).listening;
    const receiverGet = async <T>(p: string): Promise<T> => {
      const r = await h.call(receiverPort, 'GET', p);
      if (r.status !== 200) throw new Error(`receiver ${p}: ${r.status} ${r.body}`);
      return JSON.parse(r.body) as T;
    };
    const countOf = async (phase: string) => (await receiverGet<{ byPhase: Record<string, number> }>('/__count')).byPhase[phase] ?? 0;

    // The endpoint, through the API (the service runs with WEBHOOKS_ALLOW_LOOPBACK=1).
    const created = await h.call(ctx.servicePort, 'POST', '/v1/webhooks', { 'X-API-Key': ctx.apiKey, 'Content-Type': 'application/json' },
      JSON.stringify({ url: `http://127.0.0.1:${receiverPort}${WEBHOOK_PATH}`, events: ['message.*'], description: 'bench receiver' }));
    if (created.status !== 201) throw new Error(`POST /v1/webhooks: ${created.status} ${created.body}`);
    const endpoint = (JSON.parse(created.body) as { data: { id: string; signing_secret: string } }).data;
    endpointId = endpoint.id;
    const secretSet = await h.call(receiverPort, 'POST', '/__secret', { 'Content-Type': 'application/json' }, JSON.stringify({ secret: endpoint.signing_secret }));
    if (secretSet.status !== 204) throw new Error(`receiver /__secret: ${secretSet.status}`);
    log(`webhooks: receiver on :${receiverPort} (pid ${receiver.proc.pid}), endpoint ${endpoint.id} (message.*)`);

    const inserter = await connect();
    const insertOne = (phase: string) => {
      const t = now();
      const id = newId('evt', Math.floor(t));
      const msgId = newId('msg', Math.floor(t));
      const data = { message_id: msgId, channel: 'sms', from: '+15005550006', to: '+14155550100', status: 'delivered', direction: 'outbound', bench_t: t, bench_phase: phase };
      return inserter.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
         values ($1, $2, 'test', 'message.delivered', 'message', $3, 1, $4, $5)`,
        [id, ctx.organizationId, msgId, JSON.stringify(data), new Date(t)],
      );
    };

    // The workers: event relay and webhook worker (and pg-boss, idle: no messages are queued yet).
    // Each phase gets a fresh process: stopping one flushes its backends' statistics (read below).
    const workersEnv: NodeJS.ProcessEnv = { ...ctx.env, WEBHOOKS_ALLOW_LOOPBACK: '1', WEBHOOKS_CONCURRENCY: String(opts.concurrency) };
    if (opts.pollIntervalMs !== undefined) workersEnv.WEBHOOKS_POLL_INTERVAL_MS = String(opts.pollIntervalMs);
    let startupSeconds = NaN;
    /** Starts a workers process and inserts probes until the receiver (and `ready()`) saw one. */
    const startWorkers = async (ready: () => boolean = () => true) => {
      const before = await countOf('probe');
      const spawnedAt = now();
      const w = h.startChild('webhook workers', ['src/main.ts', '--workers-only'], workersEnv);
      workers = w;
      let exited = false;
      void w.exited.then(() => { exited = true; });
      log(`webhooks: workers-only process started (pid ${w.proc.pid}, WEBHOOKS_CONCURRENCY ${opts.concurrency}` +
        `${opts.pollIntervalMs !== undefined ? `, WEBHOOKS_POLL_INTERVAL_MS ${opts.pollIntervalMs}` : ''})`);
      const alive = () => {
        if (exited && workers === w) throw new Error(`webhooks: the workers process exited (${w.proc.exitCode}):\n${w.tail()}`);
      };
      const readyBy = Date.now() + 90_000;
      let first = NaN;
      for (;;) {
        alive();
        await insertOne('probe');
        await sleep(250);
        const got = (await countOf('probe')) - before;
        if (got > 0 && Number.isNaN(first)) first = (now() - spawnedAt) / 1000;
        if (got > 0 && ready()) break;
        if (Date.now() > readyBy) throw new Error(`webhooks: no probe delivered after 90 s (receiver ${got}):\n${w.tail()}`);
      }
      if (Number.isNaN(startupSeconds)) startupSeconds = first;
      log(`webhooks: first delivery ${first.toFixed(1)} s after spawn`);
      return { w, alive };
    };

    const result: WebhookResult = {
      options: opts, workersStartupSeconds: NaN,
      receiver: { duplicates: 0, badSignatures: 0, unsigned: 0, unparsable: 0 },
      workerLogLines: { warn: 0, error: 0 }, workerSampleWarning: undefined,
    };
    const stopWorkers = async (w: ReturnType<WebhookHarness['startChild']>) => {
      await w.stop();
      result.workerLogLines.warn += w.logLines.warn;
      result.workerLogLines.error += w.logLines.error;
      result.workerSampleWarning ??= w.sampleWarning();
    };

    // ---- steady rate: event → webhook delivery, event → subscription, and NOTIFY → LISTEN ----
    if (opts.latencySeconds > 0) {
      // The subscription first, so a probe also proves it is live.
      const subscriptionLatencies: number[] = [];
      const subscriptionErrors: string[] = [];
      let subscriptionProbes = 0;
      const subscribed = opts.subscriptions;
      if (subscribed) {
        ws = createClient({ url: `ws://127.0.0.1:${ctx.servicePort}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: ctx.apiKey }, retryAttempts: 0, lazy: true });
        ws.subscribe<{ events: { id: string; data: { bench_t?: number; bench_phase?: string } } }>(
          { query: 'subscription { events(types: ["message.*"]) { id type createdAt data } }' },
          {
            next: (v) => {
              const at = now();
              const d = v.data?.events.data;
              if (!d) {
                if (v.errors) subscriptionErrors.push(JSON.stringify(v.errors).slice(0, 300));
                return;
              }
              if (d.bench_phase === 'probe') subscriptionProbes++;
              else if (d.bench_phase === 'steady' && typeof d.bench_t === 'number') subscriptionLatencies.push(at - d.bench_t);
            },
            error: (e) => subscriptionErrors.push(e instanceof Error ? e.message : JSON.stringify(e).slice(0, 300)),
            complete: () => {},
          },
        );
      }
      const { w, alive } = await startWorkers(() => !subscribed || subscriptionProbes > 0 || subscriptionErrors.length > 0);
      if (subscriptionErrors.length) throw new Error(`webhooks: the subscription failed: ${subscriptionErrors.join('; ')}`);
      if (subscribed) log('webhooks: subscription live');
      const notifyLatencies: number[] = [];
      let listener: pg.Client | undefined;
      let notifier: pg.Client | undefined;
      if (subscribed) {
        listener = await connect();
        notifier = await connect();
        listener.on('notification', (msg) => {
          const at = now();
          const [t, phase] = (msg.payload ?? '').split(' ');
          if (msg.channel === 'bench_rtt' && phase === 'steady') notifyLatencies.push(at - Number(t));
        });
        await listener.query('listen bench_rtt');
      }
      const interval = 1000 / opts.latencyRate;
      const warm = Math.round(LATENCY_WARMUP_SECONDS * opts.latencyRate);
      const measured = Math.round(opts.latencySeconds * opts.latencyRate);
      log(`webhooks: latency: ${opts.latencyRate} events/s for ${LATENCY_WARMUP_SECONDS} s warm-up + ${opts.latencySeconds} s, one INSERT each` +
        (subscribed ? '; subscription and raw LISTEN/NOTIFY measured in the same seconds' : ''));
      const pending: Promise<unknown>[] = [];
      const start = now() + 20;
      const sleepUntil = async (t: number) => {
        const d = t - now();
        if (d > 0) await sleep(d);
      };
      for (let i = 0; i < warm + measured; i++) {
        const phase = i < warm ? 'warmup' : 'steady';
        await sleepUntil(start + i * interval);
        pending.push(insertOne(phase));
        if (notifier) {
          await sleepUntil(start + (i + 0.5) * interval);
          const n = notifier;
          pending.push(n.query('select pg_notify($1, $2)', ['bench_rtt', `${now()} ${phase}`]));
        }
        if (i % 50 === 0) alive();
      }
      await Promise.all(pending);
      // Let the last ones arrive (bounded).
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        const done = (await countOf('steady')) >= measured && (!subscribed || (subscriptionLatencies.length >= measured && notifyLatencies.length >= measured));
        if (done) break;
        await sleep(100);
      }
      const stats = await receiverGet<ReceiverStats>('/__stats');
      const webhookLatencies = stats.hits.filter((x) => x[1] === 'steady' && !x[4]).map((x) => x[3] - x[2]);
      const latency: NonNullable<WebhookResult['latency']> = { rate: opts.latencyRate, seconds: opts.latencySeconds, webhook: latencyStats(webhookLatencies, measured) };
      if (subscribed) {
        latency.subscription = { ...latencyStats(subscriptionLatencies, measured), errors: subscriptionErrors.slice(0, 5) };
        latency.notify = latencyStats(notifyLatencies, measured);
        latency.ratio = latency.subscription.p99 / latency.notify.p99;
      }
      result.latency = latency;
      log(`webhooks: latency p99: webhook ${latency.webhook.p99.toFixed(1)} ms` +
        (latency.subscription ? `, subscription ${latency.subscription.p99.toFixed(1)} ms, LISTEN/NOTIFY ${latency.notify!.p99.toFixed(2)} ms` : ''));
      // The subscriber is not part of the burst (the service would load every event for it).
      if (ws) {
        await ws.dispose();
        ws = undefined;
      }
      await stopWorkers(w);
    }

    // ---- burst: deliveries per second ----
    if (opts.events > 0) {
      const { w, alive } = await startWorkers();
      const dbStats = async () => {
        const { rows: [x] } = await ctx.db.query<{ xacts: string }>(
          'select xact_commit + xact_rollback as xacts from pg_stat_database where datname = current_database()');
        const { rows } = await ctx.db.query<{ name: string; ins: string; upd: string }>(
          `select case when schemaname = 'public' then relname else schemaname || '.' || relname end as name, n_tup_ins as ins, n_tup_upd as upd from pg_stat_user_tables`);
        const { rows: idx } = await ctx.db.query<{ name: string; scans: string }>(
          `select case when schemaname = 'public' then indexrelname else schemaname || '.' || indexrelname end as name, idx_scan as scans from pg_stat_user_indexes`);
        return {
          xacts: Number(x?.xacts ?? NaN),
          tables: new Map(rows.map((r) => [r.name, { ins: Number(r.ins), upd: Number(r.upd) }])),
          indexes: new Map(idx.map((r) => [r.name, Number(r.scans)])),
        };
      };
      const statsBefore = await dbStats();
      const cpuUsed = h.cpuMeter(w.proc.pid, ctx.database);
      const receiverCpu = h.cpuMeter(receiver.proc.pid, undefined);
      const serviceCpu = h.cpuMeter(ctx.servicePid, undefined);
      const machineBefore = machineCpu();
      const ids: string[] = [];
      const resourceIds: string[] = [];
      const t = now();
      const data = JSON.stringify({ channel: 'sms', from: '+15005550006', to: '+14155550100', status: 'delivered', direction: 'outbound', bench_t: t, bench_phase: 'burst' });
      for (let i = 0; i < opts.events; i++) {
        ids.push(newId('evt', Math.floor(t)));
        resourceIds.push(newId('msg', Math.floor(t)));
      }
      log(`webhooks: burst: inserting ${opts.events} events in one statement`);
      // On a connection of its own, closed at once, so its statistics are flushed (counted) too.
      const burstInserter = new pg.Client({ connectionString: ctx.dbUrl });
      burstInserter.on('error', () => {});
      await burstInserter.connect();
      await burstInserter.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
         select u.id, $2, 'test', 'message.delivered', 'message', u.rid, 1, jsonb_set($4::jsonb, '{message_id}', to_jsonb(u.rid)), $5
           from unnest($1::text[], $3::text[]) as u(id, rid)`,
        [ids, ctx.organizationId, resourceIds, data, new Date(t)],
      );
      const committed = now();
      await burstInserter.end();
      log(`webhooks: burst: committed in ${((committed - t) / 1000).toFixed(2)} s; bound ${opts.timeoutSeconds} s`);
      const deadline = committed + opts.timeoutSeconds * 1000;
      let got = 0;
      let lastChange = committed;
      let lastLog = committed;
      let timedOut = false;
      let stalled = false;
      for (;;) {
        alive();
        await sleep(250);
        const n = await countOf('burst');
        const at = now();
        if (n !== got) {
          got = n;
          lastChange = at;
        }
        if (got >= opts.events) break;
        if (at >= deadline) {
          timedOut = true;
          break;
        }
        if (at - lastChange >= STALL_SECONDS * 1000) {
          stalled = true;
          break;
        }
        if (at - lastLog >= 2000) {
          lastLog = at;
          const { rows: [q] } = await ctx.db.query<{ undispatched: number; due: number }>(
            `select (select count(*) from events_outbox)::int as undispatched,
                    (select count(*) from webhook_deliveries where status in ('pending', 'failed'))::int as due`);
          log(`webhooks: burst: ${((at - committed) / 1000).toFixed(1)} s: received ${got}, events not yet dispatched ${q?.undispatched}, deliveries pending ${q?.due}`);
        }
      }
      const stoppedAt = now();
      const used = cpuUsed();
      const usedReceiver = receiverCpu().proc;
      const usedService = serviceCpu().proc;
      const machineAfter = machineCpu();
      const stats = await receiverGet<ReceiverStats>('/__stats');
      const arrivals = stats.hits.filter((x) => x[1] === 'burst' && !x[4]).map((x) => x[3]).sort((a, b) => a - b);
      const span = (count: number, from: number | undefined, to: number | undefined) => {
        const seconds = from === undefined || to === undefined ? NaN : Math.max(0.001, (to - from) / 1000);
        return { count, seconds, rate: count / seconds };
      };
      const { rows: [d] } = await ctx.db.query<DeliveryCounts & { first: Date | null; last: Date | null }>(
        `select count(*)::int as total, (count(*) filter (where status = 'success'))::int as success,
                (count(*) filter (where status = 'pending'))::int as pending, (count(*) filter (where status = 'failed'))::int as failed,
                (count(*) filter (where status = 'dead'))::int as dead, (count(*) filter (where status = 'cancelled'))::int as cancelled,
                min(delivered_at) as first, max(delivered_at) as last
           from webhook_deliveries where event_id = any($1::text[])`, [ids]);
      const { rows: [e] } = await ctx.db.query<{ n: number; first: Date | null; last: Date | null }>(
        `select count(distinct event_id)::int as n, min(created_at) as first, max(created_at) as last from webhook_deliveries where event_id = any($1::text[])`, [ids]);
      // The workers stop here (their backends flush their statistics as they exit).
      await stopWorkers(w);
      let dbPerDelivery: NonNullable<WebhookResult['burst']>['dbPerDelivery'] = null;
      {
        await sleep(1200);
        const after = await dbStats();
        const n = Math.max(1, arrivals.length);
        const rows: Record<string, { inserted: number; updated: number }> = {};
        for (const [name, a] of after.tables) {
          const b = statsBefore.tables.get(name) ?? { ins: 0, upd: 0 };
          if (a.ins !== b.ins || a.upd !== b.upd) rows[name] = { inserted: (a.ins - b.ins) / n, updated: (a.upd - b.upd) / n };
        }
        const indexScans: Record<string, number> = {};
        for (const [name, a] of after.indexes) {
          const d = a - (statsBefore.indexes.get(name) ?? 0);
          if (d > 0) indexScans[name] = d / n;
        }
        dbPerDelivery = { xacts: (after.xacts - statsBefore.xacts) / n, rows, indexScans };
      }
      const delivered = Math.max(1, d?.success ?? arrivals.length);
      result.burst = {
        events: opts.events,
        insertSeconds: (committed - t) / 1000,
        receiver: span(arrivals.length, arrivals[0], arrivals[arrivals.length - 1]),
        deliveredAt: span(d?.success ?? 0, d?.first?.getTime(), d?.last?.getTime()),
        endToEnd: span(arrivals.length, committed, arrivals[arrivals.length - 1]),
        relay: span(e?.n ?? 0, e?.first?.getTime(), e?.last?.getTime()),
        counts: { total: d?.total ?? 0, success: d?.success ?? 0, pending: d?.pending ?? 0, failed: d?.failed ?? 0, dead: d?.dead ?? 0, cancelled: d?.cancelled ?? 0 },
        complete: arrivals.length >= opts.events,
        timedOut, stalled,
        cpuMsPerDelivery: {
          workers: (used.proc * 1000) / delivered, db: (used.db * 1000) / delivered, receiver: (usedReceiver * 1000) / delivered,
          service: (usedService * 1000) / delivered,
          interrupts: ((machineAfter.interrupts - machineBefore.interrupts) * 1000) / delivered,
          steal: ((machineAfter.steal - machineBefore.steal) * 1000) / delivered,
          rest: ((machineAfter.busy - machineBefore.busy - (machineAfter.interrupts - machineBefore.interrupts) - (machineAfter.steal - machineBefore.steal) -
            used.proc - used.db - usedReceiver - (Number.isFinite(usedService) ? usedService : 0)) * 1000) / delivered,
        },
        machine: { cpus: os.cpus().length, busy: (machineAfter.busy - machineBefore.busy) / Math.max(1e-9, machineAfter.total - machineBefore.total) },
        dbPerDelivery,
      };
      log(`webhooks: burst: ${arrivals.length}/${opts.events} received in ${((stoppedAt - committed) / 1000).toFixed(1)} s; ` +
        `${result.burst.receiver.rate.toFixed(0)}/s first → last arrival`);
    }

    const final = await receiverGet<ReceiverStats>('/__stats');
    result.receiver = {
      duplicates: final.hits.filter((x) => x[4]).length, badSignatures: final.badSignatures, unsigned: final.unsigned, unparsable: final.unparsable,
    };
    result.workersStartupSeconds = startupSeconds;
    return result;
  } finally {
    if (ws) await Promise.resolve(ws.dispose()).catch(() => {});
    if (workers) await workers.stop();
    if (endpointId) {
      // Cancels anything still pending, so later phases (the drain's relay) fan out nothing to it.
      const r = await h.call(ctx.servicePort, 'DELETE', `/v1/webhooks/${endpointId}`, { 'X-API-Key': ctx.apiKey }).catch((e: unknown) => ({ status: 0, body: String(e) }));
      if (r.status !== 204) log(`webhooks: deleting endpoint ${endpointId}: ${r.status} ${r.body.slice(0, 200)}`);
    }
    await receiver.stop();
    for (const c of clients) await c.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// Output.
// ---------------------------------------------------------------------------------------------
type Format = { fmt(n: number, digits?: number): string; table(rows: string[][]): string };

export function webhookVerdicts(r: WebhookResult): { deliveries_per_s: boolean | null; event_to_delivery_p99: boolean | null } {
  return {
    deliveries_per_s: r.burst ? r.burst.receiver.rate >= DELIVERY_TARGET_PER_S : null,
    event_to_delivery_p99: r.latency ? r.latency.webhook.p99 < LATENCY_TARGET_P99_MS && r.latency.webhook.missing === 0 : null,
  };
}

/** `notJudged`: why the targets may not be judged (background load, bench/pairs.ts loadRefusal), printed instead of PASS/MISS. */
export function webhookReport(r: WebhookResult, env: { dbPoolSize: string }, { fmt, table }: Format, notJudged?: string | null): string[] {
  const out: string[] = [];
  const o = r.options;
  const verdict = (ok: boolean | null) => (ok === null ? '' : notJudged ? `not judged: ${notJudged}` : ok ? 'PASS' : 'MISS');
  const pass = webhookVerdicts(r);
  out.push(`webhooks — one endpoint (message.*) → a bare node:http receiver on 127.0.0.1 (own process, 200 at once); events INSERTed into the outbox; ` +
    `workers-only process: WEBHOOKS_CONCURRENCY=${o.concurrency}, WEBHOOKS_POLL_INTERVAL_MS=${o.pollIntervalMs ?? '500 (default)'}, DB_POOL_SIZE=${env.dbPoolSize}; ` +
    `spawn → first delivery ${fmt(r.workersStartupSeconds, 1)} s`);
  if (r.burst) {
    const b = r.burst;
    const leg = (name: string, l: { count: number; seconds: number; rate: number }, done: string): string[] => [name, String(l.count), fmt(l.seconds, 2), fmt(l.rate, 0), done];
    const left = b.complete ? 'all' : `${b.events - b.receiver.count} left`;
    out.push(table([
      ['burst', 'deliveries', 'seconds', 'deliveries/s', 'done'],
      leg(`${b.events} events in one INSERT: receiver, first → last arrival`, b.receiver, left),
      leg('webhook_deliveries.delivered_at, first → last', b.deliveredAt, ''),
      leg('INSERT commit → last arrival (relay fan-out included)', b.endToEnd, ''),
      leg('relay: fan-out (deliveries created), first → last (events)', b.relay, ''),
    ]));
    if (b.timedOut || b.stalled) {
      out.push(`${b.timedOut ? `burst bound of ${o.timeoutSeconds} s reached` : `burst stalled (nothing arrived for ${STALL_SECONDS} s)`}: ${b.receiver.count} of ${b.events} arrived; rates above are what was achieved.`);
    }
    const c = b.cpuMsPerDelivery;
    const own = c.workers + c.db + c.receiver;
    // The workers process is one Node thread: it alone caps the rate at 1 s ÷ its CPU per delivery.
    const ceiling = Math.min((b.machine.cpus * 1000) / own, 1000 / c.workers);
    out.push(`where the time goes — CPU ms per delivery over the burst: workers process (relay + delivery worker) ${fmt(c.workers, 3)}, ` +
      `database backends ${fmt(c.db, 3)}, receiver ${fmt(c.receiver, 3)}, service (LISTEN only) ${fmt(c.service, 3)}; ` +
      `kernel interrupts (loopback network) ${fmt(c.interrupts, 3)}, stolen by the hypervisor ${fmt(c.steal, 3)}, ` +
      `other processes (the bench, PostgreSQL's WAL writer and checkpointer, other work) ${fmt(c.rest, 3)}; the machine's ${b.machine.cpus} CPUs were ${fmt(b.machine.busy * 100, 0)} % busy`);
    out.push(`  CPU-bound ceiling of this pipeline alone (workers + database + receiver on ${b.machine.cpus} CPUs, workers ≤ 1 CPU): ~${fmt(ceiling, 0)} deliveries/s; ` +
      `the measured rate is ${fmt(b.receiver.rate / ceiling * 100, 0)} % of it`);
    const pd = b.dbPerDelivery;
    if (pd) {
      const top = <T>(entries: [string, T][], weight: (v: T) => number) => entries.filter(([, v]) => weight(v) >= 0.05).sort((x, y) => weight(y[1]) - weight(x[1]));
      out.push(`database per delivery (the bench's INSERT of the event included): ${fmt(pd.xacts, 1)} transactions (pg_stat_database; every NOTIFY also wakes each LISTENing backend into one); ` +
        `rows inserted/updated: ${top(Object.entries(pd.rows), (v) => v.inserted + v.updated).map(([t, v]) => `${t} ${fmt(v.inserted, 2)}/${fmt(v.updated, 2)}`).join(', ')}; ` +
        `index scans: ${top(Object.entries(pd.indexScans), (v) => v).map(([i, v]) => `${i} ${fmt(v, 2)}`).join(', ')}`);
    }
    out.push(`burst deliveries by status: ${Object.entries(b.counts).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    out.push('');
  }
  if (r.latency) {
    const l = r.latency;
    const row = (name: string, s: LatencyStats, digits = 1): string[] =>
      [name, String(s.samples), fmt(s.p50, digits), fmt(s.p90, digits), fmt(s.p99, digits), fmt(s.max, digits), String(s.missing)];
    out.push(`event latency — ${l.rate} events/s, one INSERT each, ${LATENCY_WARMUP_SECONDS} s warm-up + ${l.seconds} s measured; arrival − event created_at (same host clock)`);
    const rows = [['path', 'samples', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'missing'], row('webhook delivery (receiver)', l.webhook)];
    if (l.subscription) rows.push(row('subscription events(types: ["message.*"]) (graphql-ws on the service)', l.subscription));
    if (l.notify) rows.push(row('raw LISTEN/NOTIFY round trip (pg, interleaved, same seconds)', l.notify, 2));
    out.push(table(rows));
    if (l.subscription?.errors.length) out.push(`subscription errors: ${l.subscription.errors.join('; ')}`);
    out.push('');
  }
  const figures = [['figure', 'value', 'target', 'value ÷ target', 'result']];
  if (r.burst) {
    figures.push(['webhook deliveries/s to a local receiver (first → last arrival)', fmt(r.burst.receiver.rate, 0), `≥ ${DELIVERY_TARGET_PER_S}`,
      fmt(r.burst.receiver.rate / DELIVERY_TARGET_PER_S, 2), verdict(pass.deliveries_per_s)]);
  }
  if (r.latency) {
    figures.push(['event-to-delivery p99 (webhook)', `${fmt(r.latency.webhook.p99, 1)} ms`, `< ${LATENCY_TARGET_P99_MS} ms`,
      fmt(r.latency.webhook.p99 / LATENCY_TARGET_P99_MS, 2), verdict(pass.event_to_delivery_p99)]);
    if (r.latency.subscription && r.latency.notify) {
      figures.push(['subscription event p99', `${fmt(r.latency.subscription.p99, 1)} ms`, '', '', '']);
      figures.push(['raw LISTEN/NOTIFY round trip p99', `${fmt(r.latency.notify.p99, 2)} ms`, '', '', '']);
      figures.push(['subscription p99 ÷ LISTEN/NOTIFY p99', fmt(r.latency.ratio ?? NaN, 1), '', '', '']);
    }
  }
  if (figures.length > 1) out.push(table(figures));
  const rc = r.receiver;
  out.push(`receiver checks: X-Service-Signature verified on every delivery (${rc.badSignatures} bad, ${rc.unsigned} unsigned), ${rc.duplicates} duplicate event ids, ${rc.unparsable} unparsable bodies. ` +
    `Webhook worker log lines: ${r.workerLogLines.warn} warn, ${r.workerLogLines.error} error`);
  if (r.workerSampleWarning) out.push(`  first worker warning: ${r.workerSampleWarning}`);
  if (r.latency && r.latency.webhook.missing) out.push(`WARNING: ${r.latency.webhook.missing} steady-rate deliveries did not arrive within 10 s after the last event (counted as a MISS).`);
  out.push('');
  return out;
}

/** JSON has no NaN: unknown figures are null. */
const num = (n: number) => (Number.isFinite(n) ? n : null);
const statsJson = (s: LatencyStats) => ({
  samples: s.samples, expected: s.expected, missing: s.missing, p50_ms: num(s.p50), p90_ms: num(s.p90), p99_ms: num(s.p99), max_ms: num(s.max), mean_ms: num(s.mean),
});
const legJson = (l: { count: number; seconds: number; rate: number }) => ({ count: l.count, seconds: num(l.seconds), per_second: num(l.rate) });

export function webhookJson(r: WebhookResult, env: { dbPoolSize: string }, notJudged?: string | null) {
  return {
    not_judged: notJudged ?? null,
    config: {
      webhooks_concurrency: r.options.concurrency, webhooks_poll_interval_ms: r.options.pollIntervalMs ?? null, db_pool_size: env.dbPoolSize,
      burst_events: r.options.events, burst_timeout_seconds: r.options.timeoutSeconds,
      latency_rate_per_s: r.options.latencyRate, latency_seconds: r.options.latencySeconds, latency_warmup_seconds: LATENCY_WARMUP_SECONDS,
      subscriptions: r.options.subscriptions,
    },
    workers_startup_seconds: num(r.workersStartupSeconds),
    targets: { deliveries_per_s: DELIVERY_TARGET_PER_S, event_to_delivery_p99_ms: LATENCY_TARGET_P99_MS },
    pass: webhookVerdicts(r),
    burst: r.burst ? {
      events: r.burst.events, insert_seconds: r.burst.insertSeconds,
      receiver_first_to_last: legJson(r.burst.receiver), delivered_at_first_to_last: legJson(r.burst.deliveredAt),
      commit_to_last_arrival: legJson(r.burst.endToEnd), relay_fan_out: legJson(r.burst.relay),
      complete: r.burst.complete, timed_out: r.burst.timedOut, stalled: r.burst.stalled, delivery_status_counts: r.burst.counts,
      cpu_ms_per_delivery: {
        workers: num(r.burst.cpuMsPerDelivery.workers), db: num(r.burst.cpuMsPerDelivery.db), receiver: num(r.burst.cpuMsPerDelivery.receiver),
        service: num(r.burst.cpuMsPerDelivery.service), kernel_interrupts: num(r.burst.cpuMsPerDelivery.interrupts),
        steal: num(r.burst.cpuMsPerDelivery.steal), other_processes: num(r.burst.cpuMsPerDelivery.rest),
      },
      machine: { cpus: r.burst.machine.cpus, busy: num(r.burst.machine.busy) },
      db_per_delivery: r.burst.dbPerDelivery,
    } : null,
    latency: r.latency ? {
      rate_per_s: r.latency.rate, seconds: r.latency.seconds,
      webhook: statsJson(r.latency.webhook),
      subscription: r.latency.subscription ? { ...statsJson(r.latency.subscription), errors: r.latency.subscription.errors } : null,
      listen_notify: r.latency.notify ? statsJson(r.latency.notify) : null,
      subscription_p99_over_listen_notify_p99: r.latency.ratio === undefined ? null : num(r.latency.ratio),
    } : null,
    receiver: r.receiver,
    worker_log_lines: r.workerLogLines,
    worker_first_warning: r.workerSampleWarning ?? null,
  };
}

// ---------------------------------------------------------------------------------------------
// Standalone: `node bench/webhooks.ts` runs only this phase (a fresh database, the admin CLI's
// organization, a `--no-workers` service), BENCH_WEBHOOK_RUNS times (default 1; the latency phase
// only in the first run), and prints each run's report and the spread of the burst figures
// (bench/results/webhooks-latest.json). The burst defaults to 10,000 events here (5,000 in
// `npm run bench`): at ~3,000/s a 5,000-event burst lasts under 2 s, and its first → last rate
// leans on the relay's first batches. Same knobs as `npm run bench`: BENCH_WEBHOOK_EVENTS, BENCH_LATENCY_SECONDS, BENCH_LATENCY_RATE,
// BENCH_SUBSCRIPTIONS, BENCH_WEBHOOKS_CONCURRENCY, BENCH_WEBHOOKS_POLL_INTERVAL_MS,
// BENCH_WEBHOOKS_TIMEOUT_SECONDS, BENCH_DATABASE_URL (else a fresh database on 127.0.0.1:5432).
// ---------------------------------------------------------------------------------------------
async function standalone(): Promise<void> {
  const support = await import('./support.ts');
  const log = support.createLog('bench:webhooks');
  const { onCleanup, cleanup } = support.createCleanup(log);
  const env = process.env;
  const int = (name: string, fallback: number, min = 0) => support.envNumber(name, fallback, min, true);
  const runs = int('BENCH_WEBHOOK_RUNS', 1, 1);
  const opts: WebhookOptions = {
    events: int('BENCH_WEBHOOK_EVENTS', 10_000), latencySeconds: int('BENCH_LATENCY_SECONDS', 10), latencyRate: int('BENCH_LATENCY_RATE', 50, 1),
    subscriptions: env.BENCH_SUBSCRIPTIONS !== '0', concurrency: int('BENCH_WEBHOOKS_CONCURRENCY', 64, 1),
    pollIntervalMs: env.BENCH_WEBHOOKS_POLL_INTERVAL_MS ? int('BENCH_WEBHOOKS_POLL_INTERVAL_MS', 500, 50) : undefined,
    timeoutSeconds: int('BENCH_WEBHOOKS_TIMEOUT_SECONDS', 45, 1),
  };

  const startChild: WebhookHarness['startChild'] = (name, args, childEnv) => support.startChild(name, args, childEnv, { log, onCleanup });
  const harness: WebhookHarness = {
    log, startChild, call: support.call,
    cpuMeter: (pid, database) => {
      const mark = support.cpuMark(pid, database);
      return () => support.cpuSince(mark, pid, database);
    },
  };
  const { fmt, table } = support;

  try {
    let dbUrl = env.BENCH_DATABASE_URL;
    let database: string | undefined;
    if (dbUrl) {
      const u = new URL(dbUrl);
      database = ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname) ? decodeURIComponent(u.pathname.slice(1)) || undefined : undefined;
    } else {
      if (!(await support.answers('127.0.0.1', 5432))) throw new Error('needs PostgreSQL on 127.0.0.1:5432 or BENCH_DATABASE_URL');
      database = `omni_bench_wh_${process.pid}`;
      dbUrl = await support.freshLocalDatabase(database, onCleanup);
    }
    log(`database: ${database ?? dbUrl}`);
    const baseEnv: NodeJS.ProcessEnv = { ...env, DATABASE_URL: dbUrl, APP_SECRET: 'bench-app-secret-0123456789abcdef', BOOTSTRAP_ORG: 'false', LOG_LEVEL: 'warn', NODE_ENV: 'production' };
    const orgOut = await support.runNode(['src/admin.ts', 'org', 'create', '--name', 'Bench', '--plan', 'enterprise', '--json'], baseEnv);
    const org = JSON.parse(orgOut.trim().split('\n').pop()!) as { organization_id: string; test_api_key: string };
    const monitor = new pg.Client({ connectionString: dbUrl });
    await monitor.connect();
    onCleanup('monitor connection', () => monitor.end());
    const servicePort = await support.freePort();
    const service = startChild('service', ['src/main.ts', '--no-workers'], { ...baseEnv, PORT: String(servicePort), HOST: '127.0.0.1', WEBHOOKS_ALLOW_LOOPBACK: '1' });
    await support.waitReady({ name: 'service', tail: service.tail, exited: service.exited }, servicePort, '/readyz');
    log(`service on :${servicePort} (pid ${service.proc.pid}); ${runs} run(s)`);

    const webhookEnv = { dbPoolSize: env.DB_POOL_SIZE ? env.DB_POOL_SIZE : '10 (default)' };
    const results: WebhookResult[] = [];
    for (let i = 0; i < runs; i++) {
      const r = await runWebhookBench(harness, { ...opts, latencySeconds: i === 0 ? opts.latencySeconds : 0 },
        { db: monitor, dbUrl, database, servicePort, servicePid: service.proc.pid, organizationId: org.organization_id, apiKey: org.test_api_key, env: baseEnv });
      results.push(r);
      process.stdout.write(`\nrun ${i + 1} of ${runs}\n${webhookReport(r, webhookEnv, { fmt, table }).join('\n')}\n`);
    }
    const bursts = results.flatMap((r) => (r.burst ? [r.burst] : []));
    if (bursts.length > 1) {
      const spread = (xs: number[]) => {
        const s = [...xs].sort((a, b) => a - b);
        return `${fmt(s[0]!, 0)} / ${fmt(s[Math.floor((s.length - 1) / 2)]!, 0)} / ${fmt(s[s.length - 1]!, 0)}`;
      };
      process.stdout.write(`\n${table([
        [`burst figures over ${bursts.length} runs`, 'min / median / max'],
        ['deliveries/s, receiver first → last arrival', spread(bursts.map((b) => b.receiver.rate))],
        ['deliveries/s, INSERT commit → last arrival', spread(bursts.map((b) => b.endToEnd.rate))],
        ['relay events/s (fan-out first → last)', spread(bursts.map((b) => b.relay.rate))],
        ['workers CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.workers * 1000))],
        ['database CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.db * 1000))],
        ['receiver CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.receiver * 1000))],
        ['kernel interrupts CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.interrupts * 1000))],
        ['stolen (hypervisor) CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.steal * 1000))],
        ['other processes CPU µs per delivery', spread(bursts.map((b) => b.cpuMsPerDelivery.rest * 1000))],
      ])}\n`);
    }
    log(`results written to ${support.writeResults('webhooks-latest.json', { timestamp: new Date().toISOString(), runs: results.map((r) => webhookJson(r, webhookEnv)) })}`);
  } finally {
    await cleanup();
  }
}

if (import.meta.main) {
  try {
    await standalone();
  } catch (e) {
    process.stderr.write(`[bench:webhooks] FAILED: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
  }
}
