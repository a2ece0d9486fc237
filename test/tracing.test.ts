/**
 * OpenTelemetry traces with a real OTLP/HTTP exporter and an in-process collector (a loopback server
 * receiving OTLP JSON): one SMS is followed from the caller's `traceparent` through the request span,
 * its database spans, the delivery and status jobs, to the `traceparent` of its webhook callbacks.
 * Span attributes carry no recipient, body or query string. Without the variables, nothing is traced.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { statementSummary, tracingEnabled } from '../src/platform/tracing.ts';
import { loadConfig } from '../src/modules/config.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type OtlpSpan = { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: { key: string; value: OtlpValue }[]; status?: { code?: number } };
type Span = { traceId: string; spanId: string; parentSpanId: string | undefined; name: string; kind: number; attrs: Record<string, string | number | boolean | undefined> };

const SERVER = 2;
const CLIENT = 3;
const CONSUMER = 5;

/** A loopback server standing in for an OpenTelemetry collector and for a webhook receiver. */
async function listen(handler: (req: http.IncomingMessage, body: string) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { body += c; });
    req.on('end', () => {
      handler(req, body);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const spans: Span[] = [];
const exports: { path: string; contentType: string | undefined }[] = [];
const callbacks: { path: string; traceparent: string | undefined; type: string }[] = [];
let collector: Awaited<ReturnType<typeof listen>>;
let receiver: Awaited<ReturnType<typeof listen>>;
let t: TestApp;

function value(v: OtlpValue): string | number | boolean | undefined {
  return v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue;
}

beforeAll(async () => {
  collector = await listen((req, body) => {
    exports.push({ path: req.url ?? '', contentType: req.headers['content-type'] });
    const doc = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
    for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) for (const s of ss.spans) {
      spans.push({
        traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, name: s.name, kind: s.kind,
        attrs: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, value(a.value)])),
      });
    }
  });
  receiver = await listen((req, body) => {
    callbacks.push({ path: req.url ?? '', traceparent: req.headers.traceparent as string | undefined, type: (JSON.parse(body) as { type: string }).type });
  });
  t = await startTestApp({
    clock: systemClock, workers: true,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'omni-test',
      WEBHOOKS_ALLOW_LOOPBACK: '1', WEBHOOKS_POLL_INTERVAL_MS: '50',
      SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '5000',
    },
  });
});

afterAll(async () => {
  await t?.close();
  await receiver?.close();
  await collector?.close();
});

const waitFor = <T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> => eventually(what, probe, ms);

describe('OpenTelemetry traces', () => {
  it('follows one SMS from the caller through its request, database and job spans to its webhook callbacks', async () => {
    expect(tracingEnabled()).toBe(true);
    const org = await t.createOrg('enterprise');
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const to = '+14155550123';
    const text = 'Your secret code is 884422';
    const r = await t.rest('POST', '/v1/messages/sms', {
      key: org.testKey, body: { to, body: text, webhook_url: `${receiver.url}/cb/one` },
      headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
    });
    expect(r.status, r.text).toBe(201);

    // Every callback (queued from the request, sent and delivered from jobs) continues the caller's trace.
    const hits = await waitFor('three callbacks', () => (callbacks.length >= 3 ? callbacks : undefined));
    expect(hits.map((h) => h.type).sort()).toEqual(['message.delivered', 'message.queued', 'message.sent']);
    for (const h of hits) expect(h.traceparent, h.type).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    await t.app.tracing!.flush();
    const trace = await waitFor('the exported trace', () => {
      const mine = spans.filter((s) => s.traceId === traceId);
      // A POST span ends before its webhook.deliver parent: both may arrive in different exports.
      const posts = mine.filter((s) => s.kind === CLIENT && s.name === 'POST').length;
      const attempts = mine.filter((s) => s.name === 'webhook.deliver').length;
      return posts >= 3 && attempts >= 3 ? mine : undefined;
    });
    expect(exports[0]).toMatchObject({ path: '/v1/traces', contentType: 'application/json' });

    // The request span: child of the caller's span, named by its route template, with the organization.
    const request = trace.find((s) => s.kind === SERVER)!;
    expect(request).toMatchObject({ name: 'POST /v1/messages/sms', parentSpanId: callerSpan });
    expect(request.attrs).toMatchObject({
      'http.request.method': 'POST', 'http.route': '/v1/messages/sms', 'http.response.status_code': 201, 'app.organization_id': org.orgId, 'app.mode': 'test',
    });
    // Its database spans: the key lookup, rate limit and the acceptance statement at least.
    const dbSpans = trace.filter((s) => s.parentSpanId === request.spanId && s.attrs['db.system.name'] === 'postgresql');
    expect(dbSpans.length).toBeGreaterThanOrEqual(2);
    for (const s of dbSpans) expect(s.kind).toBe(CLIENT);

    // The delivery (a row of the delivery queue) continues the request's trace, and the webhook attempts made from its events.
    const jobs = trace.filter((s) => s.kind === CONSUMER && (s.name.startsWith('job ') || s.name === 'messaging.deliver'));
    expect(jobs.length).toBeGreaterThanOrEqual(1);
    expect(jobs.some((j) => j.parentSpanId === request.spanId)).toBe(true);
    const providerSend = trace.find((s) => s.name === 'provider.send sandbox')!;
    expect(providerSend).toMatchObject({ kind: CLIENT, attrs: { 'app.channel': 'sms' } });
    expect(jobs.map((j) => j.spanId)).toContain(providerSend.parentSpanId);
    const deliveries = trace.filter((s) => s.name === 'webhook.deliver');
    expect(deliveries.length).toBe(3);
    const posts = trace.filter((s) => s.kind === CLIENT && s.name === 'POST');
    for (const p of posts) expect(deliveries.map((d) => d.spanId)).toContain(p.parentSpanId);
    // The traceparent each callback received is its POST span.
    for (const h of hits) expect(posts.map((p) => p.spanId)).toContain(h.traceparent!.split('-')[2]);

    // No recipient, message text or webhook path in any span of the trace.
    const everything = JSON.stringify(trace);
    expect(everything).not.toContain(to);
    expect(everything).not.toContain('884422');
    expect(everything).not.toContain('/cb/one');
  }, 30_000);

  it('names a GraphQL request span by its operation', async () => {
    const org = await t.createOrg('starter');
    const r = await t.gql('query WhoAmI { viewer { role } }', {}, { key: org.testKey });
    expect(r.status).toBe(200);
    await t.app.tracing!.flush();
    const span = await waitFor('the GraphQL span', () => spans.find((s) => s.kind === SERVER && s.name === 'query WhoAmI'));
    expect(span.attrs).toMatchObject({ 'graphql.operation.type': 'query', 'graphql.operation.name': 'WhoAmI', 'http.route': '/graphql', 'app.organization_id': org.orgId });
  });
});

describe('tracing configuration', () => {
  const base = { APP_SECRET: 'x'.repeat(32) };
  it('is off without an OTLP endpoint, and reads the standard variables', () => {
    expect(loadConfig(base, []).tracing.endpoint).toBeUndefined();
    const on = loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_EXPORTER_OTLP_HEADERS: 'x-token=a%20b,x-other=1', OTEL_TRACES_SAMPLER_ARG: '0.25' }, []);
    expect(on.tracing).toEqual({ endpoint: 'http://collector:4318/v1/traces', headers: { 'x-token': 'a b', 'x-other': '1' }, serviceName: 'omnichannel-platform', sampleRatio: 0.25 });
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c/traces', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x' }, []).tracing.endpoint).toBe('http://c/traces');
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_SDK_DISABLED: 'true' }, []).tracing.endpoint).toBeUndefined();
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_TRACES_EXPORTER: 'none' }, []).tracing.endpoint).toBeUndefined();
    expect(() => loadConfig({ ...base, OTEL_TRACES_SAMPLER_ARG: '2' }, [])).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });

  it('summarizes statements without their values', () => {
    expect(statementSummary('select * from "api_keys" k where k.key_hash = $1')).toEqual({ operation: 'SELECT', table: 'api_keys' });
    expect(statementSummary('insert into pgboss.job (id) values ($1)')).toEqual({ operation: 'INSERT', table: 'pgboss.job' });
    expect(statementSummary('update webhook_deliveries set x = 1')).toEqual({ operation: 'UPDATE', table: 'webhook_deliveries' });
    expect(statementSummary('with a as (select 1) select * from a')).toEqual({ operation: 'WITH', table: undefined });
  });
});
