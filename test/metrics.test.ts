/** GET /metrics: off without METRICS_TOKEN; with it, token-protected Prometheus text with HTTP, rate-limit, queue and pool metrics. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

const TOKEN = 'metrics-token-0123456789';
let t: TestApp;
beforeAll(async () => { t = await startTestApp({ clock: systemClock, env: { METRICS_TOKEN: TOKEN } }); });
afterAll(async () => { await t?.close(); });

const scrape = async (token?: string) => fetch(`${t.baseUrl}/metrics`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });

describe('GET /metrics', () => {
  it('refuses a scrape without the token', async () => {
    expect((await scrape()).status).toBe(401);
    expect((await scrape('wrong')).status).toBe(401);
  });

  it('counts requests by surface, route template and status, with latency, rate-limit rejections, queues and the pool', async () => {
    const org = await t.createOrg('starter');
    await t.rest('GET', '/v1/messages/msg_01abcdefghjkmnpqrstvwxyz00', { key: org.testKey });
    await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'hi' } });
    await t.gql('{ viewer { role } }', {}, { key: org.testKey });
    const r = await scrape(TOKEN);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    const text = await r.text();
    expect(text).toMatch(/http_requests_total\{surface="rest",route="\/v1\/messages\/\{id\}",method="GET",status="404"\} 1/);
    expect(text).toMatch(/http_requests_total\{surface="rest",route="\/v1\/messages\/sms",method="POST",status="201"\} 1/);
    expect(text).toMatch(/http_requests_total\{surface="graphql",route="\/graphql",method="POST",status="200"\} 1/);
    expect(text).toMatch(/http_request_duration_seconds_bucket\{le="[\d.]+",surface="rest",route="\/v1\/messages\/sms",method="POST"\} 1/);
    expect(text).toMatch(/pgboss_jobs\{queue="[^"]+",state="[a-z]+"\} \d+/);
    expect(text).toMatch(/db_pool_connections\{state="total"\} \d+/);
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    expect(text).toContain('rate_limit_rejections_total');
  });

  it('records 429s as rate-limit rejections', async () => {
    const org = await t.createOrg('starter');
    // Starter: 30 SMS per minute.
    const answers = await Promise.all(Array.from({ length: 33 }, (_, i) => t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: `+1415555${String(1000 + i)}`, body: 'x' } })));
    const limited = answers.filter((a) => a.status === 429).length;
    expect(limited).toBeGreaterThan(0);
    const text = await (await scrape(TOKEN)).text();
    const counted = Number(/rate_limit_rejections_total\{surface="rest",route="\/v1\/messages\/sms"\} (\d+)/.exec(text)?.[1]);
    expect(counted).toBe(limited);
  }, 60_000);
});

describe('without METRICS_TOKEN', () => {
  it('keeps no metrics and /metrics is not found', async () => {
    const plain = await startTestApp();
    try {
      expect((await fetch(`${plain.baseUrl}/metrics`)).status).toBe(404);
    } finally {
      await plain.close();
    }
  });
});
