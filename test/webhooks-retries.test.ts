/**
 * Webhooks' retry schedule on an injected clock (Retry-After, 410, 3xx, timeout, cancellation, dead
 * letters and replay) and delivery claims, against a real local receiver (test/helpers/webhooks.ts).
 * `mc` runs on a ManualClock: the test moves the clock past next_retry_at and the worker, polling
 * every 50 ms of real time, attempts again.
 */

import { beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { RETRY_SCHEDULE_MS } from '../src/modules/webhooks/webhooks.service.ts';
import { newId } from '../src/platform/ids.ts';
import type { TestApp } from './helpers/testApp.ts';
import { createEndpoint, expectError, expectSigned, type Receiver, sendSms, sleep, uniq, useWebhookApps, waitFor } from './helpers/webhooks.ts';

const apps = useWebhookApps({ mc: true });
let mc: TestApp;
let recv: Receiver;
let redirectTarget: Receiver;
beforeAll(() => { ({ mc, recv, redirectTarget } = apps); });

// ---------------------------------------------------------------------------------------------

describe('retry schedule (manual clock)', () => {
  const clock = () => mc.clock as ManualClock;
  type Row = { id: string; status: string; attempt: number; next_attempt_at: Date | null; http_status: number | null; last_error: string | null };

  async function deliveriesOf(endpointId: string): Promise<Row[]> {
    const { rows } = await mc.db.query('select id, status, attempt, next_attempt_at, http_status, last_error from webhook_deliveries where endpoint_id = $1 order by id', [endpointId]);
    return rows;
  }
  async function deliveryRow(id: string): Promise<Row> {
    const { rows } = await mc.db.query('select id, status, attempt, next_attempt_at, http_status, last_error from webhook_deliveries where id = $1', [id]);
    return rows[0];
  }
  /** Waits for the worker to finish attempt `n` of the delivery. */
  const attemptDone = (id: string, n: number) => waitFor(`attempt ${n} of ${id}`, async () => {
    const r = await deliveryRow(id);
    return r && r.attempt >= n && r.status !== 'pending' ? r : undefined;
  });
  /** The single delivery of an endpoint once its first attempt is logged. */
  const firstDelivery = (endpointId: string) => waitFor('the first attempt', async () => {
    const [r] = await deliveriesOf(endpointId);
    return r && r.attempt >= 1 ? r : undefined;
  });

  it('retries at 1 min, 5 min, 30 min, 2 h, 8 h and 24 h, then dead-letters with an event, and replays', async () => {
    const org = await mc.createOrg('enterprise', 'Retry org');
    const key = org.testKey;
    const path = `/r/${uniq()}/fail`;
    recv.reply(path, { status: 500 });
    const ep = await createEndpoint(mc, key, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, key);

    let d = await firstDelivery(ep.id);
    const id = d.id;
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 500, last_error: 'HTTP 500' });
    // The frozen clock has not moved since the attempt: next_retry_at is relative to this instant.
    let attemptAt = clock().now().getTime();
    // Not before next_retry_at: a second before it nothing happens.
    clock().set(d.next_attempt_at!.getTime() - 1000);
    await sleep(300);
    expect(await deliveryRow(id)).toMatchObject({ status: 'failed', attempt: 1 });
    expect(recv.hitsAt(path)).toHaveLength(1);

    for (let n = 1; n <= 6; n++) {
      const scheduled = RETRY_SCHEDULE_MS[n - 1]!;
      const delay = d.next_attempt_at!.getTime() - attemptAt;
      expect(delay, `delay after attempt ${n}`).toBeGreaterThanOrEqual(Math.floor(scheduled * 0.95));
      expect(delay, `delay after attempt ${n}`).toBeLessThanOrEqual(Math.ceil(scheduled * 1.05));
      attemptAt = d.next_attempt_at!.getTime();
      clock().set(attemptAt);
      d = await attemptDone(id, n + 1);
      expect(d.http_status).toBe(500);
    }
    expect(d).toMatchObject({ status: 'dead', attempt: 7, next_attempt_at: null });
    expect(recv.hitsAt(path)).toHaveLength(7);
    // Every attempt carried the same event and a valid signature.
    for (const h of recv.hitsAt(path)) expectSigned(h, ep.signing_secret);
    expect(new Set(recv.hitsAt(path).map((h) => h.body)).size).toBe(1);

    clock().advance(1000);
    const dead = await mc.rest('GET', '/v1/webhooks/dead-letters', { key });
    expect(dead.status, dead.text).toBe(200);
    expect(dead.body.data.map((x: { id: string }) => x.id)).toEqual([id]);
    expect(dead.body.data[0]).toMatchObject({ status: 'dead', attempt: 7, http_status: 500, endpoint_id: ep.id, event_type: 'message.queued' });
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${id}`, { key });
    expect(detail.status, detail.text).toBe(200);
    expect(detail.body.data.status).toBe('dead');
    const attempts = detail.body.data.attempts;
    expect(attempts.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const a of attempts) {
      expect(a).toMatchObject({ status: 'failed', http_status: 500, error: 'HTTP 500' });
      expect(typeof a.response_time_ms).toBe('number');
    }
    expect(attempts.slice(0, 6).every((a: { next_retry_at: string | null }) => a.next_retry_at !== null)).toBe(true);
    expect(attempts[6].next_retry_at).toBeNull();
    // The gaps between attempts follow the schedule.
    const gaps = attempts.slice(1).map((a: { created_at: string }, i: number) => Date.parse(a.created_at) - Date.parse(attempts[i].created_at));
    gaps.forEach((gap: number, i: number) => {
      expect(gap).toBeGreaterThanOrEqual(RETRY_SCHEDULE_MS[i]! * 0.95);
      expect(gap).toBeLessThanOrEqual(RETRY_SCHEDULE_MS[i]! * 1.05);
    });
    const { rows: events } = await mc.db.query("select type, data from events where type = 'webhook.delivery.dead' and organization_id = $1", [org.orgId]);
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ delivery_id: id, endpoint_id: ep.id, event_type: 'message.queued', attempts: 7 });

    recv.reply(path, { status: 200 });
    const replay = await mc.rest('POST', `/v1/webhooks/deliveries/${id}/replay`, { key });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body.data).toMatchObject({ id, status: 'pending' });
    await waitFor('the replay to succeed', async () => (await deliveryRow(id)).status === 'success');
    clock().advance(1000);
    const after = await mc.rest('GET', `/v1/webhooks/deliveries/${id}`, { key });
    expect(after.body.data).toMatchObject({ status: 'success', http_status: 200 });
    expect(after.body.data.delivered_at).not.toBeNull();
    // The replay is a new round, logged after the first one.
    expect(after.body.data.attempts.map((a: { attempt: number; status: string }) => [a.attempt, a.status])).toEqual([
      [1, 'failed'], [2, 'failed'], [3, 'failed'], [4, 'failed'], [5, 'failed'], [6, 'failed'], [7, 'failed'], [1, 'success'],
    ]);
    expect(after.body.data.attempts[7]).toMatchObject({ http_status: 200, next_retry_at: null });
    expect(recv.hitsAt(path)).toHaveLength(8);
    expect(recv.hitsAt(path)[7]!.body).toBe(recv.hitsAt(path)[0]!.body);
    expect((await mc.rest('GET', '/v1/webhooks/dead-letters', { key })).body.data).toEqual([]);
    // A delivered delivery cannot be replayed.
    expectError(await mc.rest('POST', `/v1/webhooks/deliveries/${id}/replay`, { key }), 409, 'CONFLICT');
  });

  it('honours Retry-After', async () => {
    const org = await mc.createOrg('enterprise', 'Retry-After org');
    const path = `/r/${uniq()}/busy`;
    recv.reply(path, { status: 503, headers: { 'Retry-After': '600' } });
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 503 });
    const delay = d.next_attempt_at!.getTime() - clock().now().getTime();
    expect(delay).toBeGreaterThanOrEqual(600_000);
    expect(delay).toBeLessThanOrEqual(601_000);
    // Not at the usual minute.
    clock().advance(Math.ceil(RETRY_SCHEDULE_MS[0]! * 1.05) + 1000);
    await sleep(300);
    expect(await deliveryRow(d.id)).toMatchObject({ attempt: 1 });
    clock().set(d.next_attempt_at!);
    expect(await attemptDone(d.id, 2)).toMatchObject({ status: 'failed', http_status: 503 });
    expect(recv.hitsAt(path)).toHaveLength(2);
    clock().advance(1000);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('a 410 disables the endpoint and cancels the delivery; later events are not delivered', async () => {
    const org = await mc.createOrg('enterprise', 'Gone org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/r/${u}/gone`, { status: 410 });
    const gone = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/gone`), events: ['message.queued'] });
    const control = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/control`), events: ['message.queued'] });
    await sendSms(mc, key);
    const d = await waitFor('the 410 to be handled', async () => {
      const [r] = await deliveriesOf(gone.id);
      return r?.status === 'cancelled' ? r : undefined;
    });
    expect(d).toMatchObject({ attempt: 1, http_status: 410, next_attempt_at: null });
    const ep = await mc.rest('GET', `/v1/webhooks/${gone.id}`, { key });
    expect(ep.body.data).toMatchObject({ active: false });
    expect(ep.body.data.disabled_reason).toMatch(/410/);
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${d.id}`, { key });
    expect(detail.body.data).toMatchObject({ status: 'cancelled', http_status: 410 });
    expect(detail.body.data.attempts).toHaveLength(1);

    const m2 = await sendSms(mc, key);
    await waitFor('the control endpoint to get the second message', () => recv.hitsAt(`/r/${u}/control`).some((h) => h.json.data.message_id === m2.id));
    expect(await deliveriesOf(gone.id)).toHaveLength(1);
    clock().advance(25 * 3600_000);
    await sleep(200);
    expect(recv.hitsAt(`/r/${u}/gone`)).toHaveLength(1);
    void control;
  });

  it('does not follow redirects: a 3xx is a failure', async () => {
    const org = await mc.createOrg('enterprise', 'Redirect org');
    const path = `/r/${uniq()}/moved`;
    recv.reply(path, { status: 302, headers: { Location: redirectTarget.url('/target') } });
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 302, last_error: 'HTTP 302' });
    expect(recv.hitsAt(path)).toHaveLength(1);
    expect(redirectTarget.hitsAt('/target')).toHaveLength(0);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('fails an attempt that gets no answer within the timeout', async () => {
    const org = await mc.createOrg('enterprise', 'Timeout org');
    const path = `/r/${uniq()}/hang`;
    recv.reply(path, 'hang');
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: null });
    expect(d.last_error).toMatch(/^timeout: /);
    expect(d.next_attempt_at).not.toBeNull();
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${d.id}`, { key: org.testKey });
    expect(detail.body.data.attempts).toHaveLength(1);
    expect(detail.body.data.attempts[0]).toMatchObject({ attempt: 1, status: 'failed', http_status: null, response_time_ms: null });
    expect(detail.body.data.attempts[0].error).toMatch(/^timeout/);
    expect(recv.hitsAt(path)).toHaveLength(1);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('cancels pending deliveries of a deleted endpoint and of an inactive one', async () => {
    const org = await mc.createOrg('enterprise', 'Cancel org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/r/${u}/deleted`, { status: 500 });
    recv.reply(`/r/${u}/paused`, { status: 500 });
    const toDelete = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/deleted`), events: ['message.queued'] });
    const toPause = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/paused`), events: ['message.queued'] });
    await sendSms(mc, key);
    const d1 = await firstDelivery(toDelete.id);
    const d2 = await firstDelivery(toPause.id);
    expect([d1.status, d2.status]).toEqual(['failed', 'failed']);

    expect((await mc.rest('DELETE', `/v1/webhooks/${toDelete.id}`, { key })).status).toBe(204);
    const cancelled = await mc.rest('GET', `/v1/webhooks/deliveries/${d1.id}`, { key });
    expect(cancelled.body.data).toMatchObject({ status: 'cancelled', next_retry_at: null, last_error: 'endpoint deleted' });
    expect((await mc.rest('PUT', `/v1/webhooks/${toPause.id}`, { key, body: { active: false } })).body.data.active).toBe(false);

    clock().advance(2 * 3600_000);
    await waitFor('the paused endpoint\'s delivery to be cancelled', async () => (await deliveryRow(d2.id)).status === 'cancelled');
    expect((await deliveryRow(d2.id)).last_error).toBe('endpoint inactive');
    await sleep(200);
    expect(recv.hitsAt(`/r/${u}/deleted`)).toHaveLength(1);
    expect(recv.hitsAt(`/r/${u}/paused`)).toHaveLength(1);
    expect((await deliveryRow(d1.id)).status).toBe('cancelled');
  });
});

describe('claims (manual clock)', () => {
  const clock = () => mc.clock as ManualClock;

  it('a delivery claimed by a worker that then crashed is attempted once its claim expires, not before', async () => {
    const org = await mc.createOrg('enterprise', 'Crashed worker org');
    const path = `/claim/${uniq()}`;
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    const now = clock().now();
    const id = newId('dlv', now.getTime());
    const payload = JSON.stringify({ id: 'evt_crashed', type: 'message.queued', created_at: now.toISOString(), sequence: 1, data: {} });
    // As another worker leaves it when it dies after claiming: pending, locked for the next 60 s.
    await mc.db.query(
      `insert into webhook_deliveries (id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, status, attempt, next_attempt_at, locked_until, created_at, updated_at)
       values ($1, $2, 'test', $3, $4, 'evt_crashed', 'message.queued', $5, 'pending', 0, $6, $7, $6, $6)`,
      [id, org.orgId, ep.id, recv.url(path), payload, now, new Date(now.getTime() + 60_000)]);
    await sleep(300);
    expect(recv.hitsAt(path)).toHaveLength(0);
    clock().advance(61_000);
    const hit = await waitFor('the delivery after the claim expired', () => recv.hitsAt(path)[0]);
    expect(hit.body).toBe(payload);
    expectSigned(hit, ep.signing_secret);
    await waitFor('the outcome', async () => (await mc.db.query('select status from webhook_deliveries where id = $1', [id])).rows[0]?.status === 'success');
    await sleep(200);
    expect(recv.hitsAt(path)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
