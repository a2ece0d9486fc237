/**
 * The stale-reservation sweep (issues 17 and 20: nothing accepted is lost or doubled, not even
 * money), over HTTP against the real database with an injected clock. A process that dies between
 * reserving and settling is simulated by what it leaves behind: a reservation made the way the
 * dying process made it and never settled (an agent turn), or a message whose status change
 * committed while its settlement did not. Past BILLING_STALE_RESERVATION_SECONDS the sweep settles
 * such reservations through the ordinary capture/release: an agent turn's is released (and a turn
 * that outlives the bound cannot store its answer unpaid), a message's by its status (in flight:
 * left alone; its delivery job over without sending: the message fails and is released). A capture
 * racing the sweep settles each reservation once, and the balance stays the ledger's sum.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { systemScope, type Scope } from '../src/platform/auth/scope.ts';
import { requestHash } from '../src/platform/idempotency.ts';
import { turnKeyOf } from '../src/modules/agents/agents.billing.ts';
import { priceOf } from '../src/modules/billing/billing.plans.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually, expectError } from './helpers/assertions.ts';
import { liveOrgWithBalance } from './helpers/billing.ts';
import { startFakeLlm, type FakeLlm } from './helpers/fakeLlm.ts';

const clock = new ManualClock(Date.now());
/** The default bound: 10 minutes (ten LLM_TIMEOUT_MS of 30 s would be less). */
const BOUND_MS = 600_000;
const MODEL = 'gpt-4o-mini';
const PRICE = priceOf('growth', 'agent.invocation', 1);
const SMS_PRICE = priceOf('growth', 'sms.segment', 1);

let llm: FakeLlm;
let t: TestApp;

beforeAll(async () => {
  llm = await startFakeLlm();
  // No workers: nothing is delivered and no scheduled sweep runs; each test runs the sweep itself.
  t = await startTestApp({
    clock, workers: false,
    env: {
      LLM_BASE_URL: llm.url, LLM_API_KEY: 'sk-fake', LLM_TIMEOUT_MS: '30000', MESSAGING_LIVE_SANDBOX: 'true',
      BILLING_LIVE_SANDBOX: 'true', SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '1', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '0',
    },
  });
});
afterAll(async () => {
  await t?.close();
  await llm?.close();
});

const sweep = () => t.app.services.reservationSweep.run();
const balanceOf = async (o: TestOrg) => (await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance as number;
const scopeOf = (o: TestOrg): Scope => systemScope(o.orgId, 'live', 'growth', 'req_test');

/** The live ledger of an organization: its sum, and each reservation (by key) with its settlements. */
async function ledger(orgId: string) {
  const { rows: sum } = await t.db.query(`select coalesce(sum(amount), 0)::int as sum from credit_ledger_entries where organization_id = $1 and mode = 'live'`, [orgId]);
  const { rows } = await t.db.query<{ id: string; key: string; amount: number; settlements: string[] }>(
    `select r.id, r.idempotency_key as key, r.amount::int as amount,
            coalesce(array_agg(s.kind order by s.id) filter (where s.id is not null), '{}') as settlements
       from credit_ledger_entries r left join credit_ledger_entries s on s.reference_id = r.id
      where r.organization_id = $1 and r.mode = 'live' and r.kind = 'reservation' group by r.id order by r.id`, [orgId]);
  return { sum: sum[0].sum as number, reservations: rows };
}
const settlementsOf = async (orgId: string, key: string) => (await ledger(orgId)).reservations.find((r) => r.key === key)?.settlements;

async function liveAgent(o: TestOrg): Promise<string> {
  const created = await t.rest('POST', '/v1/agents', { key: o.liveKey, body: { name: 'Billed', type: 'conversational', model: MODEL, system_prompt: 'You are helpful.', channels: ['web'] } });
  expect(created.status, created.text).toBe(201);
  expect((await t.rest('POST', `/v1/agents/${created.body.data.id}/deploy`, { key: o.liveKey, body: {} })).status).toBe(200);
  return created.body.data.id;
}

/** The turn key a chat request under `idempotencyKey` reserves under (as chat.service derives it from the claim). */
function chatTurnKey(o: TestOrg, agent: string, body: unknown, idempotencyKey: string): string {
  const claimKey = `request:${requestHash('POST', `/v1/agents/${agent}/chat`, JSON.stringify(body)).slice(0, 32)}:0:${idempotencyKey}`;
  return turnKeyOf(scopeOf(o), claimKey);
}

async function agentMessages(orgId: string): Promise<number> {
  const { rows } = await t.db.query(`select count(*)::int as n from agent_messages where organization_id = $1 and mode = 'live'`, [orgId]);
  return rows[0].n;
}

describe('agent turns', () => {
  it('a turn whose process died after reserving: released once past the bound, never before; a retry then pays under a fresh key', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const body = { message: 'hello [died-1]' };
    const key = chatTurnKey(o, agent, body, `died-${o.orgId}`);
    // What the dying process did: reserved for its turn, then never captured nor released.
    await t.app.services.credits.reserve(scopeOf(o), { amount: PRICE, key, description: 'Agent invocation' });
    expect(await balanceOf(o)).toBe(100 - PRICE);

    await sweep();
    clock.advance(BOUND_MS - 1000);
    await sweep();
    expect(await settlementsOf(o.orgId, key)).toEqual([]);
    expect(await balanceOf(o)).toBe(100 - PRICE);

    clock.advance(2000);
    await Promise.all([sweep(), sweep(), sweep()]);
    await sweep();
    expect(await settlementsOf(o.orgId, key)).toEqual(['release']);
    expect(await balanceOf(o)).toBe(100);
    expect((await ledger(o.orgId)).sum).toBe(100);

    // The client retries the turn under its Idempotency-Key: paid once, under the next key.
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers: { 'Idempotency-Key': `died-${o.orgId}` } });
    expect(r.status, r.text).toBe(200);
    const after = await ledger(o.orgId);
    expect(after.reservations.filter((x) => x.key.startsWith(key)).map((x) => [x.key, x.settlements])).toEqual([[key, ['release']], [`${key}#2`, ['capture']]]);
    expect(await balanceOf(o)).toBe(100 - PRICE);
    expect(after.sum).toBe(100 - PRICE);
  });

  it('a retry finding its open reservation past half the bound releases it and reserves afresh (the sweep could release it under the retry)', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const body = { message: 'hello [aged-1]' };
    const key = chatTurnKey(o, agent, body, `aged-${o.orgId}`);
    await t.app.services.credits.reserve(scopeOf(o), { amount: PRICE, key, description: 'Agent invocation' });
    clock.advance(BOUND_MS / 2 + 1000);
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers: { 'Idempotency-Key': `aged-${o.orgId}` } });
    expect(r.status, r.text).toBe(200);
    expect((await ledger(o.orgId)).reservations.map((x) => [x.key, x.settlements])).toEqual([[key, ['release']], [`${key}#2`, ['capture']]]);
    expect(await balanceOf(o)).toBe(100 - PRICE);
    // Nothing left for the sweep.
    clock.advance(BOUND_MS);
    await sweep();
    expect((await ledger(o.orgId)).reservations.map((x) => x.settlements)).toEqual([['release'], ['capture']]);
  });

  it('a turn still running past the bound: the sweep releases its reservation, and the turn then fails AGENT_ERROR without storing an unpaid answer', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const pending = t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [gate:late-1]' } });
    await eventually('the model called', () => (llm.callsWith('[gate:late-1]').length === 1 ? true : undefined));
    const [reservation] = (await ledger(o.orgId)).reservations.filter((x) => x.key.startsWith('agent_turn:'));
    expect(reservation).toMatchObject({ amount: -PRICE, settlements: [] });

    clock.advance(BOUND_MS + 1000);
    expect(await sweep()).toMatchObject({ released: 1 });
    expect(await balanceOf(o)).toBe(100);

    llm.open('late-1');
    const r = await pending;
    expect(expectError(r, 500, 'AGENT_ERROR').error.details).toMatchObject({ reason: 'reservation_released' });
    expect(await settlementsOf(o.orgId, reservation!.key)).toEqual(['release']);
    expect(await agentMessages(o.orgId)).toBe(0);
    expect((await t.rest('GET', `/v1/agents/${agent}/conversations`, { key: o.liveKey })).body.data).toEqual([]);
    expect(await balanceOf(o)).toBe(100);
    expect((await ledger(o.orgId)).sum).toBe(100);
  });
});

describe('a capture racing the sweep', () => {
  it('settles every reservation exactly once (capture or release), and the balance is the ledger sum', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const tenant = { organizationId: o.orgId, mode: 'live' as const };
    const credits = t.app.services.credits;
    const reserved = await Promise.all(Array.from({ length: 40 }, (_, i) => credits.reserve(scopeOf(o), { amount: 2, key: `agent_turn:race-${o.orgId}-${i}` })));
    expect(await balanceOf(o)).toBe(20);
    clock.advance(BOUND_MS + 1000);
    // Three sweeps (as from three instances) and a capture of every reservation, all at once.
    const [captured] = await Promise.all([
      Promise.all(reserved.map((r) => credits.capture(tenant, r.reservationId))),
      sweep(), sweep(), sweep(),
    ]);
    const { sum, reservations } = await ledger(o.orgId);
    const mine = reservations.filter((r) => r.key.startsWith('agent_turn:race-'));
    expect(mine).toHaveLength(40);
    for (const [i, r] of reserved.entries()) {
      const row = mine.find((m) => m.id === r.reservationId)!;
      expect(row.settlements).toHaveLength(1);
      // A capture that answered true is the settlement; one that answered false lost to the sweep's release.
      expect(row.settlements[0]).toBe(captured[i] ? 'capture' : 'release');
    }
    const released = mine.filter((r) => r.settlements[0] === 'release').length;
    expect(await balanceOf(o)).toBe(20 + 2 * released);
    expect(sum).toBe(20 + 2 * released);
    const { rows } = await t.db.query('select count(*)::int as n from credit_reservation_watch where organization_id = $1', [o.orgId]);
    expect(rows[0].n).toBe(0);
  });

  it('waits for a capture still in its transaction (never skips it), then leaves the reservation captured', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const tenant = { organizationId: o.orgId, mode: 'live' as const };
    const credits = t.app.services.credits;
    const r = await credits.reserve(scopeOf(o), { amount: 5, key: `agent_turn:held-${o.orgId}` });
    clock.advance(BOUND_MS + 1000);
    // A turn storing its answer: its capture is written, its transaction not committed yet.
    const turn = await t.db.connect();
    try {
      await turn.query('begin');
      expect(await credits.capture(tenant, r.reservationId, turn)).toBe(true);
      const swept = sweep();
      await eventually('the sweep waiting on the capture', async () => {
        const { rows } = await t.db.query(`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into credit_ledger_entries%'`);
        return rows[0].n > 0 ? true : undefined;
      });
      await turn.query('commit');
      expect(await swept).toMatchObject({ released: 0 });
    } finally {
      turn.release();
    }
    expect(await settlementsOf(o.orgId, `agent_turn:held-${o.orgId}`)).toEqual(['capture']);
    expect(await balanceOf(o)).toBe(95);
    expect((await ledger(o.orgId)).sum).toBe(95);
  });
});

describe('messages', () => {
  async function sendEmail(o: TestOrg & { sender: string }, i: number): Promise<string> {
    const r = await t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: [`reader${i}@example.com`], subject: 'Hi', text: 'Hello' } });
    expect(r.status, r.text).toBe(201);
    return r.body.data.id;
  }
  /** The state a process that died after a status change, before its settlement, leaves behind. */
  const setStatus = (id: string, status: string) =>
    t.db.query(`update messages set status = $2, sent_at = case when $2 <> 'queued' then $3::timestamptz else sent_at end,
      failed_at = case when $2 = 'failed' then $3::timestamptz else failed_at end where id = $1`, [id, status, clock.now()]);
  /** A delivery that ran out of attempts: its row of the delivery queue dropped. */
  const failDeliveryJob = async (messageId: string) => {
    const { rowCount } = await t.db.query('delete from messaging_deliveries where message_id = $1', [messageId]);
    expect(rowCount).toBe(1);
  };

  it('settles a message reservation by the message status: delivered, read or a sent email captured; failed released; in flight left alone; a dead delivery job fails its message', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push(await sendEmail(o, i));
    expect(await balanceOf(o)).toBe(94);
    const [delivered, failed, sent, read, queued, dead] = ids as [string, string, string, string, string, string];
    await setStatus(delivered, 'delivered');
    await setStatus(failed, 'failed');
    await setStatus(sent, 'sent');
    await setStatus(read, 'read');
    await failDeliveryJob(dead);

    await sweep();
    expect((await ledger(o.orgId)).reservations.filter((r) => r.key.startsWith('msg_')).every((r) => r.settlements.length === 0)).toBe(true);
    clock.advance(BOUND_MS + 1000);
    expect(await sweep()).toMatchObject({ captured: 3, released: 1, pending: 1 });
    await sweep();
    const settled = Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await settlementsOf(o.orgId, id)])));
    expect(settled).toEqual({ [delivered]: ['capture'], [failed]: ['release'], [sent]: ['capture'], [read]: ['capture'], [queued]: [], [dead]: ['release'] });
    const gone = await t.rest('GET', `/v1/messages/${dead}`, { key: o.liveKey });
    expect(gone.body.data).toMatchObject({ status: 'failed', error_code: 'MESSAGE_SEND_FAILED' });
    expect(await balanceOf(o)).toBe(96);
    expect((await ledger(o.orgId)).sum).toBe(96);

    // The one in flight fails later (its settlement lost too): the next check, a minute on, releases it.
    await setStatus(queued, 'failed');
    clock.advance(61_000);
    expect(await sweep()).toMatchObject({ released: 1 });
    expect(await settlementsOf(o.orgId, queued)).toEqual(['release']);
    expect(await balanceOf(o)).toBe(97);
    expect((await ledger(o.orgId)).sum).toBe(97);
  });

  it('a sent SMS with no delivery report waits, and is captured once 72 hours passed without one', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    expect((await t.rest('POST', '/v1/messages/senders', { key: o.liveKey, body: { channel: 'sms', address: '+14155550188' } })).status).toBe(201);
    const r = await t.rest('POST', '/v1/messages/sms', { key: o.liveKey, body: { to: '+14155550142', body: 'Your order shipped' } });
    expect(r.status, r.text).toBe(201);
    const id = r.body.data.id as string;
    expect(await balanceOf(o)).toBe(100 - SMS_PRICE);
    await setStatus(id, 'sent');
    clock.advance(BOUND_MS + 1000);
    expect(await sweep()).toMatchObject({ pending: 1 });
    clock.advance(71 * 3_600_000);
    await sweep();
    expect(await settlementsOf(o.orgId, id)).toEqual([]);
    clock.advance(3_600_000);
    await sweep();
    expect(await settlementsOf(o.orgId, id)).toEqual(['capture']);
    expect(await balanceOf(o)).toBe(100 - SMS_PRICE);
  });
});
