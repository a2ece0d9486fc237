/**
 * What the numbers test files share (test/numbers*.test.ts): the file's app (workers, system clock,
 * fast sandbox carrier) with two enterprise organizations, a local receiver for webhook deliveries
 * and per-number callbacks, the number and port views, and search/buy calls.
 */
import { expect } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { eventually as pollUntil } from './assertions.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './testApp.ts';
import { startReceiver, type Hit } from './receiver.ts';

export const APP_ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: '1',
  WEBHOOKS_POLL_INTERVAL_MS: '50',
  SANDBOX_PORT_SUBMIT_MS: '100',
  SANDBOX_PORT_COMPLETE_MS: '200',
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
};

export type Listing = { number: string; friendly_name: string; country: string; type: string; region: string; capabilities: string[]; monthly_cost: string; currency: string };
export type NumberView = Listing & {
  id: string; status: string; sms_webhook_url: string | null; voice_webhook_url: string | null; agent_id: string | null; source: string;
  port_request_id: string | null; billing_period_start: string | null; billing_period_end: string | null; created_at: string; updated_at: string;
};
export type PortView = {
  id: string; numbers: string[]; status: string; estimated_completion: string; phone_number_ids: string[] | null; error_code: string | null;
  rejection_code: string | null; rejection_reason: string | null; submitted_at: string | null; completed_at: string | null; rejected_at: string | null;
  account_number: string | null; created_at: string;
};

export function expectError(res: HttpResponse, status: number, code: string, field?: string): void {
  expect({ status: res.status, code: res.body?.error?.code }, res.text).toEqual({ status, code });
  if (field !== undefined) expect(res.body.error.details.field).toBe(field);
}

/** assertions.ts's `eventually`, with the 15 s these files wait by default (ports go through the workers). */
export function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  return pollUntil(what, probe, timeoutMs);
}

export type NumbersApp = { t: TestApp; a: TestOrg; b: TestOrg; receiverUrl: string; hitsAt(path: string): Hit[]; close(): Promise<void> };

/** The app and a local receiver (node:http on 127.0.0.1) for webhook deliveries and per-number callbacks. */
export async function startNumbersApp(): Promise<NumbersApp> {
  const receiver = await startReceiver();
  const receiverUrl = receiver.url;
  const hits = receiver.hits;
  const t = await startTestApp({ workers: true, clock: systemClock, env: APP_ENV });
  const a = await t.createOrg('enterprise', 'Numbers A');
  const b = await t.createOrg('enterprise', 'Numbers B');
  return {
    t, a, b, receiverUrl,
    hitsAt: (path) => hits.filter((h) => h.path === path),
    async close() {
      await t.close();
      receiver.close();
    },
  };
}

/** Search and buy calls on `app` (as `defaultOrg` unless another key is given). */
export function numbersHelpers(app: () => TestApp, defaultOrg: () => TestOrg) {
  const qs = (q: Record<string, string | number>) => new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)])).toString();
  const searchRaw = (q: Record<string, string | number>, key = defaultOrg().testKey) => app().rest<{ data: Listing[] }>('GET', `/v1/numbers/available?${qs(q)}`, { key });
  async function search(q: Record<string, string | number>, key = defaultOrg().testKey): Promise<Listing[]> {
    const res = await searchRaw(q, key);
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }
  const buyRaw = (body: Record<string, unknown>, key = defaultOrg().testKey) => app().rest<any>('POST', '/v1/numbers', { key, body });
  async function buy(body: Record<string, unknown>, key = defaultOrg().testKey): Promise<NumberView> {
    const res = await buyRaw(body, key);
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }
  /** The first number the query offers now (held numbers are skipped, so each call gives a new one once bought). */
  async function available(q: Record<string, string | number> = {}): Promise<Listing> {
    const [first] = await search({ country: 'US', type: 'local', limit: 1, ...q });
    expect(first).toBeDefined();
    return first!;
  }
  return { searchRaw, search, buyRaw, buy, available };
}
