/**
 * Sends under an Idempotency-Key exist once even when the process dies between the message's
 * commit and the storing of the response (issue 20, scenario 2: gateway kill -9 while accepting).
 * The window is reproduced by putting the idempotency row back the way a killed request leaves it
 * (state 'running', no response) or, for a request that failed after its commit, removing it; the
 * retry with the same key must answer with the message already accepted.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { IdempotencyClaim, requestHash } from '../src/platform/idempotency.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let clock: ManualClock;
beforeAll(async () => {
  t = await startTestApp();
  clock = t.clock as ManualClock;
});
afterAll(async () => { await t?.close(); });
// A fresh second (burst slots) for every test.
beforeEach(() => { clock.advance(1000); });

let seq = 0;
const newIdemKey = () => `msg-idem-${Date.now().toString(36)}-${++seq}`;
const phone = () => `+1415556${String(1000 + ++seq).padStart(4, '0')}`;

function sendSms(org: TestOrg, key: string, body: Record<string, unknown>): Promise<HttpResponse> {
  return t.rest('POST', '/v1/messages/sms', { key: org.testKey, body, headers: { 'Idempotency-Key': key } });
}

/** The idempotency row as a gateway killed after the message's commit leaves it: running, no response. */
async function leaveRunning(org: TestOrg, key: string): Promise<void> {
  const { rowCount } = await t.db.query(
    `update idempotency_keys set state = 'running', response_status = null, response_headers = null, response_body = null, locked_at = $4
      where organization_id = $1 and mode = $2 and key = $3`, [org.orgId, 'test', key, clock.now()]);
  expect(rowCount).toBe(1);
}

async function forgetClaim(org: TestOrg, key: string): Promise<void> {
  await t.db.query('delete from idempotency_keys where organization_id = $1 and mode = $2 and key = $3', [org.orgId, 'test', key]);
}

async function messagesTagged(org: TestOrg, tag: string): Promise<{ id: string; idempotency_key: string | null }[]> {
  const { rows } = await t.db.query(
    `select id, idempotency_key from messages where organization_id = $1 and metadata->>'tag' = $2 order by id`, [org.orgId, tag]);
  return rows;
}

/** `deliveries`: rows of the delivery queue (no workers run here, so a queued delivery stays) and delivery jobs. */
async function sideEffects(messageId: string): Promise<{ events: number; usage: number; deliveries: number }> {
  const { rows: [r] } = await t.db.query(
    `select (select count(*)::int from events where resource_id = $1 and type = 'message.queued') as events,
            (select count(*)::int from usage_entries where resource_id = $1) as usage,
            (select count(*)::int from messaging_deliveries where message_id = $1)
              + (select count(*)::int from pgboss.job where data->'data'->>'messageId' = $1) as deliveries`, [messageId]);
  return r;
}

describe('a send committed, the response never stored (process killed in between)', () => {
  it('REST: the retry that takes the stale claim over returns the same message; one message, event, usage entry and delivery', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const body = { to: phone(), body: 'exactly once', metadata: { tag: key } };

    const first = await sendSms(org, key, body);
    expect(first.status).toBe(201);
    const id = first.body.data.id as string;
    await leaveRunning(org, key);

    // Within a minute the claim still looks busy.
    const early = await sendSms(org, key, body);
    expect(early.status).toBe(409);
    expect(early.body.error.message).toMatch(/still being processed/);

    clock.advance(61_000);
    const retry = await sendSms(org, key, body);
    expect(retry.status).toBe(201);
    expect(retry.body.data).toMatchObject({ id, message_id: id, to: body.to, body: 'exactly once', status: 'queued', metadata: { tag: key } });
    expect(await messagesTagged(org, key)).toEqual([{ id, idempotency_key: `0:${key}` }]);
    expect(await sideEffects(id)).toEqual({ events: 1, usage: 1, deliveries: 1 });

    // The retry's response is the one stored now, and replayed.
    const replay = await sendSms(org, key, body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(retry.text);
  });

  it('REST: a retry after the claim was released (the attempt failed after its commit) finds the message; a different request with the key is CONFLICT', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const body = { to: phone(), body: 'released', metadata: { tag: key } };

    const first = await sendSms(org, key, body);
    expect(first.status).toBe(201);
    const id = first.body.data.id as string;
    await forgetClaim(org, key);

    // A fresh claim, not a takeover: the message insert conflicts on its key and the send answers with the message.
    const retry = await sendSms(org, key, body);
    expect(retry.status).toBe(201);
    expect(retry.body.data.id).toBe(id);
    expect(await messagesTagged(org, key)).toHaveLength(1);
    expect(await sideEffects(id)).toEqual({ events: 1, usage: 1, deliveries: 1 });

    await forgetClaim(org, key);
    const other = await sendSms(org, key, { ...body, body: 'another text' });
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: 'CONFLICT', details: { idempotency_key: key } });
    expect(other.body.error.message).toMatch(/different request/);
    expect(await messagesTagged(org, key)).toHaveLength(1);
  });

  it('REST: after the key\'s 24 h lifetime the message releases it and the key sends anew', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const body = { to: phone(), body: 'day one', metadata: { tag: key } };
    const first = await sendSms(org, key, body);
    expect(first.status).toBe(201);

    clock.advance(25 * 3600 * 1000);
    await forgetClaim(org, key); // as the prune job does
    const later = await sendSms(org, key, { ...body, body: 'day two' });
    expect(later.status).toBe(201);
    expect(later.body.data.id).not.toBe(first.body.data.id);
    const rows = await messagesTagged(org, key);
    expect(rows).toEqual([{ id: first.body.data.id, idempotency_key: null }, { id: later.body.data.id, idempotency_key: `0:${key}` }]);
  });

  it('POST /v1/messages/{id}/retry: the retried send is found again, not made twice', async () => {
    const org = await t.createOrg('growth');
    const original = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: phone(), body: 'will fail', metadata: { tag: 'retry-src' } } });
    expect(original.status).toBe(201);
    await t.db.query(`update messages set status = 'failed' where id = $1`, [original.body.data.id]);
    const key = newIdemKey();
    const path = `/v1/messages/${original.body.data.id}/retry`;
    const first = await t.rest('POST', path, { key: org.testKey, headers: { 'Idempotency-Key': key } });
    expect(first.status).toBe(201);
    await leaveRunning(org, key);
    clock.advance(61_000);
    const again = await t.rest('POST', path, { key: org.testKey, headers: { 'Idempotency-Key': key } });
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(first.body.data.id);
    const { rows } = await t.db.query('select count(*)::int as n from messages where original_message_id = $1', [original.body.data.id]);
    expect(rows[0].n).toBe(1);
  });

  it('GraphQL: a document with two sends under one key keeps them apart, and its retry returns both', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const doc = `mutation($a: String!, $b: String!, $tag: JSON) {
      a: sendSms(input: { to: $a, body: "first", metadata: $tag }) { id }
      b: sendSms(input: { to: $b, body: "second", metadata: $tag }) { id }
    }`;
    const vars = { a: phone(), b: phone(), tag: { tag: key } };
    const first = await t.gql(doc, vars, { key: org.testKey, headers: { 'Idempotency-Key': key } });
    expect(first.body.errors).toBeUndefined();
    const { a, b } = first.body.data as { a: { id: string }; b: { id: string } };
    expect(a.id).not.toBe(b.id);
    expect(await messagesTagged(org, key)).toEqual(
      [{ id: a.id, idempotency_key: `0:${key}` }, { id: b.id, idempotency_key: `1:${key}` }].sort((x, y) => x.id.localeCompare(y.id)));

    await leaveRunning(org, key);
    clock.advance(61_000);
    const retry = await t.gql(doc, vars, { key: org.testKey, headers: { 'Idempotency-Key': key } });
    expect(retry.body.errors).toBeUndefined();
    expect(retry.body.data).toEqual({ a: { id: a.id }, b: { id: b.id } });
    expect(await messagesTagged(org, key)).toHaveLength(2);
  });
});

describe('group commit with a conflicting send', () => {
  it('one send of a batch whose key already has a message gets that message; the others are accepted', async () => {
    const org = await t.createOrg('growth');
    const scope = systemScope(org.orgId, 'test', 'growth', 'req_batch_conflict');
    const messaging = t.app.services.messaging;
    const tag = newIdemKey();
    const hash = requestHash('POST', '/v1/messages/sms', tag);
    const input = (to: string) => ({ to, body: 'batched', metadata: { tag } });
    const earlier = await messaging.sendSms(scope, input(phone()), { idempotency: new IdempotencyClaim(tag, hash, false).next() });

    // Watch the group commit's statements.
    const pool = t.app.pool;
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
    const accepts: { ok: boolean; code?: string }[] = [];
    (pool as { query: unknown }).query = async (...args: unknown[]) => {
      const name = (args[0] as { name?: string } | undefined)?.name;
      if (!name?.startsWith('messaging_accept_')) return query(...args);
      try {
        const r = await query(...args);
        accepts.push({ ok: true });
        return r;
      } catch (e) {
        accepts.push({ ok: false, code: (e as { code?: string }).code });
        throw e;
      }
    };
    let sent;
    try {
      // Started in one turn of the event loop: they join one batch.
      sent = await Promise.all([
        ...Array.from({ length: 5 }, (_, i) => messaging.sendSms(scope, input(phone()), { idempotency: new IdempotencyClaim(`${tag}-${i}`, hash, false).next() })),
        messaging.sendSms(scope, input(phone()), { idempotency: new IdempotencyClaim(tag, hash, false).next() }),
        messaging.sendSms(scope, input(phone())),
      ]);
    } finally {
      (pool as { query: unknown }).query = query;
    }
    expect(sent[5]!.id).toBe(earlier.id);
    const fresh = [...sent.slice(0, 5), sent[6]!].map((m) => m.id);
    expect(new Set(fresh).size).toBe(6);
    expect(fresh).not.toContain(earlier.id);

    const rows = await messagesTagged(org, tag);
    expect(rows.map((r) => r.id).sort()).toEqual([earlier.id, ...fresh].sort());
    for (const id of fresh) expect(await sideEffects(id)).toEqual({ events: 1, usage: 1, deliveries: 1 });
    expect(await sideEffects(earlier.id)).toEqual({ events: 1, usage: 1, deliveries: 1 });
    // The batch failed on the conflict as a whole and was run again item by item: only the conflicting send failed there.
    expect(accepts[0]).toEqual({ ok: false, code: '23505' });
    expect(accepts.slice(1).filter((a) => !a.ok)).toEqual([{ ok: false, code: '23505' }]);
    expect(accepts.slice(1).filter((a) => a.ok)).toHaveLength(6);
  });
});
