/**
 * `GET /metrics` in the Prometheus text format (prom-client), for the operator. Off unless
 * METRICS_TOKEN is set (nothing is measured then); when on, a scrape must send
 * `Authorization: Bearer <METRICS_TOKEN>`. Measured: HTTP requests by surface, route template,
 * method and status with latency histograms; rate-limit rejections; pg-boss jobs per queue and
 * state; database pool use; process metrics including event-loop lag; and what this process's
 * workers report through the platform's Instruments: webhook deliveries by outcome with latency,
 * dispatched events by type, and messages by channel and status (from the `message.*` events); and
 * the carrier connectors' states and binds as their rows hold them.
 */
import { timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import type { Pool } from 'pg';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { PGBOSS_SCHEMA } from '../platform/db/orm.ts';
import type { RestRoute } from '../rest/route.ts';
import { NO_INSTRUMENTS, type Instruments } from '../platform/instruments.ts';

export type Metrics = {
  /** Called once per finished request. */
  observe(method: string, path: string, status: number, seconds: number): void;
  /** Answers `/metrics`; false for any other path (and for `/metrics` when metrics are off). */
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string): boolean;
  /** What the workers report (webhooks, events, messages). */
  instruments: Instruments;
};

const OFF: Metrics = { observe: () => {}, handle: () => false, instruments: NO_INSTRUMENTS };

/** The statuses a `message.<status>` event reports (`queued`: accepted). */
const MESSAGE_STATUSES = new Set(['queued', 'sent', 'delivered', 'read', 'failed', 'received']);

/** `/v1/messages/msg_01…` → `/v1/messages/{id}`: a bounded label set (unknown paths are `other`). */
export function routeTemplates(routes: readonly RestRoute[]): (method: string, path: string) => { surface: string; route: string } {
  const compiled = routes.map((r) => ({ method: r.method, path: r.path, regex: new RegExp(`^${r.path.replace(/\{\w+\}/g, '[^/]+')}/?$`), params: (r.path.match(/\{/g) ?? []).length }))
    .sort((a, b) => a.params - b.params);
  return (method, path) => {
    if (path === '/graphql') return { surface: 'graphql', route: '/graphql' };
    if (path.startsWith('/v1/')) {
      const hit = compiled.find((c) => c.method === method && c.regex.test(path)) ?? compiled.find((c) => c.regex.test(path));
      return { surface: 'rest', route: hit ? hit.path : 'other' };
    }
    return { surface: 'other', route: ['/healthz', '/readyz', '/metrics', '/docs', '/docs/errors'].includes(path) ? path : 'other' };
  };
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(header?.startsWith('Bearer ') ? header.slice(7) : '');
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

export function createMetrics(opts: { token: string | undefined; pool: Pool; routes: () => readonly RestRoute[] }): Metrics {
  const { token, pool } = opts;
  if (!token) return OFF;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({ name: 'http_requests_total', help: 'HTTP requests by surface, route template, method and status', labelNames: ['surface', 'route', 'method', 'status'], registers: [registry] });
  const latency = new Histogram({
    name: 'http_request_duration_seconds', help: 'HTTP request latency by surface and route template', labelNames: ['surface', 'route', 'method'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry],
  });
  const rejected = new Counter({ name: 'rate_limit_rejections_total', help: 'Requests answered 429 (window, burst or quota) by surface and route template', labelNames: ['surface', 'route'], registers: [registry] });
  new Gauge({
    name: 'db_pool_connections', help: 'Connections of the raw PostgreSQL pool by state', labelNames: ['state'], registers: [registry],
    collect() {
      this.set({ state: 'total' }, pool.totalCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  new Gauge({
    name: 'pgboss_jobs', help: 'pg-boss jobs per queue and state (created and retry are the queue depth)', labelNames: ['queue', 'state'], registers: [registry],
    async collect() {
      this.reset();
      const r = await pool.query<{ name: string; state: string; n: string }>(`select name, state::text as state, count(*) as n from ${PGBOSS_SCHEMA}.job group by 1, 2`).catch(() => ({ rows: [] }));
      for (const row of r.rows) this.set({ queue: row.name, state: row.state }, Number(row.n));
    },
  });
  new Gauge({
    name: 'messaging_deliveries', help: 'Messages waiting for their send in the delivery queue (messaging_deliveries): due now, or later (claimed under a lease, waiting for a retry or a paced slot)',
    labelNames: ['state'], registers: [registry],
    async collect() {
      this.reset();
      const r = await pool.query<{ due: string; later: string }>(
        'select count(*) filter (where due_at <= now()) as due, count(*) filter (where due_at > now()) as later from messaging_deliveries').catch(() => ({ rows: [] }));
      const row = r.rows[0];
      if (!row) return;
      this.set({ state: 'due' }, Number(row.due));
      this.set({ state: 'later' }, Number(row.later));
    },
  });
  new Gauge({
    name: 'messaging_connector_state', help: 'Carrier connectors (docs/messaging.md, Carriers): 1 at the state each one\'s instances last reported (connected, degraded, down, disabled)',
    labelNames: ['connector', 'kind', 'state'], registers: [registry],
    async collect() {
      this.reset();
      const r = await pool.query<{ id: string; kind: string; status: string }>('select id, kind, status from messaging_connectors').catch(() => ({ rows: [] }));
      for (const row of r.rows) this.set({ connector: row.id, kind: row.kind, state: row.status }, 1);
    },
  });
  new Gauge({
    name: 'messaging_connector_binds_up', help: 'Carrier connectors: binds up, as last reported', labelNames: ['connector'], registers: [registry],
    async collect() {
      this.reset();
      const r = await pool.query<{ id: string; binds_up: number }>('select id, binds_up from messaging_connectors').catch(() => ({ rows: [] }));
      for (const row of r.rows) this.set({ connector: row.id }, row.binds_up);
    },
  });
  const deliveries = new Counter({ name: 'webhook_deliveries_total', help: 'Webhook delivery attempts by outcome (success, retry, dead, cancelled, gone: 410 disabled the endpoint)', labelNames: ['outcome'], registers: [registry] });
  const deliveryLatency = new Histogram({
    name: 'webhook_delivery_duration_seconds', help: 'Webhook POST duration (DNS, connect, response) by outcome', labelNames: ['outcome'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15], registers: [registry],
  });
  const events = new Counter({ name: 'events_dispatched_total', help: 'Outbox events handed to webhooks and subscribers, by type', labelNames: ['type'], registers: [registry] });
  const messages = new Counter({
    name: 'messages_total', help: 'Messages by channel and status as their events are dispatched: status="queued" counts accepted messages, the others status transitions (and "received" inbound ones)',
    labelNames: ['channel', 'status'], registers: [registry],
  });
  const instruments: Instruments = {
    webhookDelivery(outcome, seconds) {
      deliveries.inc({ outcome });
      if (seconds !== null) deliveryLatency.observe({ outcome }, seconds);
    },
    eventDispatched(type, data) {
      events.inc({ type });
      if (!type.startsWith('message.')) return;
      const status = type.slice('message.'.length);
      if (MESSAGE_STATUSES.has(status) && typeof data.channel === 'string') messages.inc({ channel: data.channel, status });
    },
  };
  let template: ReturnType<typeof routeTemplates> | undefined;
  return {
    instruments,
    observe(method, path, status, seconds) {
      template ??= routeTemplates(opts.routes());
      const { surface, route } = template(method, path);
      requests.inc({ surface, route, method, status: String(status) });
      latency.observe({ surface, route, method }, seconds);
      if (status === 429) rejected.inc({ surface, route });
    },
    handle(req, res, path) {
      if (path !== '/metrics') return false;
      if (!tokenMatches(req.headers.authorization, token)) {
        res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer realm="metrics"' });
        res.end('metrics need Authorization: Bearer <METRICS_TOKEN>\n');
        return true;
      }
      registry.metrics().then((body) => {
        res.writeHead(200, { 'Content-Type': registry.contentType });
        res.end(body);
      }, (e: unknown) => {
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(`metrics failed: ${String(e)}\n`);
      });
      return true;
    },
  };
}
