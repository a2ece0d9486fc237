/**
 * Number port requests end to end over HTTP through their lifecycle to `number.ported` at a local
 * webhook receiver (test/helpers/numbers.ts), and monthly renewals. A second app without workers
 * keeps ports pending for the open-port conflicts.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, expectError, numbersHelpers, startNumbersApp, type NumbersApp, type Listing, type NumberView, type PortView } from './helpers/numbers.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';

const file = useFileApp(startNumbersApp);
let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let receiverUrl = '';
let hitsAt: NumbersApp['hitsAt'];
beforeAll(() => { ({ t, a, b, receiverUrl, hitsAt } = file()); });
const { buy, available } = numbersHelpers(() => t, () => a);

/** Business days strictly between two dates' calendar days (weekends skipped), UTC. */
function businessDaysBetween(from: Date, to: Date): number {
  let days = 0;
  const d = new Date(from.getTime());
  while (d.toISOString().slice(0, 10) < to.toISOString().slice(0, 10)) {
    d.setUTCDate(d.getUTCDate() + 1);
    if (d.getUTCDay() !== 0 && d.getUTCDay() !== 6) days++;
  }
  return days;
}

describe('port requests', () => {
  let org: TestOrg;
  let endpointSecret = '';
  const portBody = (numbers: string[], extra: Record<string, unknown> = {}) => ({ numbers, current_carrier: 'Verizon', authorization_name: 'Jane Doe', account_number: '7788990011', pin: '4321', ...extra });
  const createPort = (body: Record<string, unknown>, key = org.testKey) => t.rest<any>('POST', '/v1/numbers/port', { key, body });
  const getPort = async (id: string): Promise<PortView> => (await t.rest('GET', `/v1/numbers/port/${id}`, { key: org.testKey })).body.data;
  const until = (id: string, status: string) => eventually(`${id} ${status}`, async () => {
    const p = await getPort(id);
    return p.status === status ? p : undefined;
  });

  beforeAll(async () => {
    org = await t.createOrg('enterprise', 'Numbers porting');
    const wh = await t.rest('POST', '/v1/webhooks', { key: org.testKey, body: { url: `${receiverUrl}/hooks/${org.orgId}`, events: ['number.ported', 'port.*'] } });
    expect(wh.status, wh.text).toBe(201);
    endpointSecret = wh.body.data.signing_secret;
  });

  it('moves pending → submitted → completed; the numbers join the inventory and number.ported reaches the webhook', async () => {
    const numbers = ['+12025550143', '+12025550178'];
    const created = await createPort(portBody(numbers));
    expect(created.status, created.text).toBe(201);
    const port = created.body.data;
    expect(port).toMatchObject({ numbers, status: 'pending', account_number: '******0011', phone_number_ids: null, error_code: null, submitted_at: null });
    expect(port.id).toMatch(/^port_/);
    expect(JSON.stringify(port)).not.toContain('4321');
    const eta = new Date(port.estimated_completion);
    expect(businessDaysBetween(new Date(port.created_at), eta)).toBeGreaterThanOrEqual(7);
    expect(businessDaysBetween(new Date(port.created_at), eta)).toBeLessThanOrEqual(14);
    expect([0, 6]).not.toContain(eta.getUTCDay());

    const done = await until(port.id, 'completed');
    expect(done.submitted_at).not.toBeNull();
    expect(done.completed_at).not.toBeNull();
    expect(done.phone_number_ids).toHaveLength(2);
    const listed = await t.rest('GET', '/v1/numbers', { key: org.testKey });
    const joined = listed.body.data.filter((n: NumberView) => numbers.includes(n.number));
    expect(joined.map((n: NumberView) => n.id).sort()).toEqual([...done.phone_number_ids!].sort());
    for (const n of joined) expect(n).toMatchObject({ status: 'active', source: 'ported', port_request_id: port.id, country: 'US', type: 'local', region: 'DC' });
    const usage = await t.db.query(`select count(*)::int as n from usage_entries where kind = 'number.monthly' and resource_id = any($1)`, [done.phone_number_ids]);
    expect(usage.rows[0].n).toBe(2);
    const sms = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'ported sender', from: numbers[1] } });
    expect(sms.status, sms.text).toBe(201);

    const ported = await eventually('number.ported deliveries', () => {
      const got = hitsAt(`/hooks/${org.orgId}`).filter((h) => h.json?.type === 'number.ported' && numbers.includes(h.json.data.number));
      return got.length === 2 ? got : undefined;
    });
    for (const h of ported) {
      expect(h.headers['x-service-signature']).toBe(createHmac('sha256', endpointSecret).update(h.body).digest('hex'));
      expect(h.json).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'number.ported', created_at: expect.any(String), data: { port_request_id: port.id, status: 'active', source: 'ported' } });
      expect(done.phone_number_ids).toContain(h.json.data.phone_number_id);
    }
    const lifecycle = await eventually('port events', () => {
      const types = hitsAt(`/hooks/${org.orgId}`).filter((h) => h.json?.data?.port_request_id === port.id && h.json.type.startsWith('port.')).map((h) => h.json.type);
      return types.length === 3 ? types : undefined;
    });
    expect(lifecycle.sort()).toEqual(['port.completed', 'port.created', 'port.submitted']);
  });

  it('a wrong PIN is rejected at submission (PORT_REQUEST_FAILED) and frees the numbers', async () => {
    const number = '+12025550191';
    const port = (await createPort(portBody([number], { pin: '0000' }))).body.data;
    const rejected = await until(port.id, 'rejected');
    expect(rejected).toMatchObject({ error_code: 'PORT_REQUEST_FAILED', rejection_code: 'pin_mismatch', submitted_at: null, phone_number_ids: null });
    expect(rejected.rejection_reason).toMatch(/PIN/);
    expect(rejected.rejected_at).not.toBeNull();
    // Free again: it can be ported (or bought) now.
    const retry = await createPort(portBody([number]));
    expect(retry.status, retry.text).toBe(201);
    await until(retry.body.data.id, 'completed');
    const event = await eventually('port.rejected delivery', () => hitsAt(`/hooks/${org.orgId}`).find((h) => h.json?.type === 'port.rejected' && h.json.data.port_request_id === port.id));
    expect(event.json.data).toMatchObject({ error_code: 'PORT_REQUEST_FAILED', rejection_code: 'pin_mismatch' });
  });

  it('a number the losing carrier will not release is rejected after submission', async () => {
    const port = (await createPort(portBody(['+12025550000', '+12025550001']))).body.data;
    const rejected = await until(port.id, 'rejected');
    expect(rejected).toMatchObject({ error_code: 'PORT_REQUEST_FAILED', rejection_code: 'number_not_portable' });
    expect(rejected.submitted_at).not.toBeNull();
    const rows = await t.db.query('select status from phone_numbers where port_request_id = $1', [port.id]);
    expect(rows.rows.map((r) => r.status)).toEqual(['port_rejected', 'port_rejected']);
    await buy({ number: '+12025550001' }, b.testKey);
  });

  it('validates the request', async () => {
    expectError(await createPort({ current_carrier: 'X', authorization_name: 'Y' }), 422, 'MISSING_REQUIRED_FIELD', 'numbers');
    expectError(await createPort({ numbers: ['+12025550150'], authorization_name: 'Y' }), 422, 'MISSING_REQUIRED_FIELD', 'current_carrier');
    expectError(await createPort({ numbers: ['+12025550150'], current_carrier: 'X' }), 422, 'MISSING_REQUIRED_FIELD', 'authorization_name');
    expectError(await createPort(portBody([])), 422, 'VALIDATION_ERROR', 'numbers');
    expectError(await createPort(portBody(['+12025550150', 'nope'])), 422, 'INVALID_PHONE_NUMBER', 'numbers.1');
    expectError(await createPort(portBody(['+12025550150', '+1 202 555 0150'])), 422, 'VALIDATION_ERROR', 'numbers');
    expectError(await createPort(portBody(['+12025550150'], { pin: '12 34' })), 422, 'VALIDATION_ERROR', 'pin');
    const premium = await createPort(portBody(['+19005551234']));
    expectError(premium, 422, 'PORT_REQUEST_FAILED', 'numbers.0');
    expect(premium.body.error.details.reason).toBe('not_portable');
    expectError(await createPort(portBody(['+12025550150']), org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
    const developer = await t.createKey(org.orgId, 'developer');
    expectError(await createPort(portBody(['+12025550150']), developer), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('refuses numbers that are already held: own (NUMBER_ALREADY_OWNED) or another customer\'s (NUMBER_NOT_AVAILABLE)', async () => {
    const mine = await buy({ number: (await available({ area_code: '808' })).number }, org.testKey);
    const own = await createPort(portBody([mine.number]));
    expectError(own, 409, 'NUMBER_ALREADY_OWNED', 'numbers.0');
    const theirs = await buy({ number: (await available({ area_code: '808' })).number }, b.testKey);
    expectError(await createPort(portBody(['+12025550160', theirs.number])), 409, 'NUMBER_NOT_AVAILABLE', 'numbers.1');
    // Nothing of a refused request is kept.
    expect((await t.db.query('select count(*)::int as n from phone_numbers where number = $1', ['+12025550160'])).rows[0].n).toBe(0);
  });

  it('lists and gets port requests, with a status filter, and the GraphQL twins', async () => {
    const list = await t.rest('GET', '/v1/numbers/port', { key: org.testKey });
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThanOrEqual(4);
    const ids = list.body.data.map((p: PortView) => p.id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const rejected = await t.rest('GET', '/v1/numbers/port?status=rejected', { key: org.testKey });
    expect(rejected.body.data.map((p: PortView) => p.status)).toEqual(['rejected', 'rejected']);
    const page = await t.rest('GET', '/v1/numbers/port?limit=1', { key: org.testKey });
    expect(page.body.meta.pagination.has_more).toBe(true);
    expectError(await t.rest('GET', '/v1/numbers/port?status=lost', { key: org.testKey }), 422, 'VALIDATION_ERROR', 'status');
    expectError(await t.rest('GET', `/v1/numbers/port/${ids[0]}`, { key: a.testKey }), 404, 'NOT_FOUND');
    expect((await t.rest('GET', '/v1/numbers/port', { key: a.testKey })).body.data.map((p: PortView) => p.id)).not.toContain(ids[0]);

    const gql = await t.gql('query($id: ID!) { portRequests(first: 10, status: completed) { edges { node { id status phoneNumberIds } } } portRequest(id: $id) { id numbers status estimatedCompletion errorCode } node(id: $id) { ... on PortRequest { currentCarrier } } }', { id: ids[0] }, { key: org.testKey });
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.portRequests.edges.every((e: any) => e.node.status === 'completed' && e.node.phoneNumberIds.length > 0)).toBe(true);
    expect(gql.body.data.portRequest.id).toBe(ids[0]);
    expect(gql.body.data.node.currentCarrier).toBe('Verizon');
    const created = await t.gql('mutation { createPortRequest(input: { numbers: ["+12025550166"], currentCarrier: "T-Mobile", authorizationName: "Jane Doe", pin: "0000" }) { id status numbers } }', {}, { key: org.testKey });
    expect(created.body.data.createPortRequest).toMatchObject({ status: 'pending', numbers: ['+12025550166'] });
    await until(created.body.data.createPortRequest.id, 'rejected');
  });
});

describe('open ports (no workers: ports stay pending)', () => {
  let p: TestApp;
  let x: TestOrg;
  let y: TestOrg;
  beforeAll(async () => {
    p = await startTestApp({ env: { WEBHOOKS_ALLOW_LOOPBACK: '1' } });
    x = await p.createOrg('enterprise', 'Pending X');
    y = await p.createOrg('enterprise', 'Pending Y');
  });
  afterAll(async () => { await p?.close(); });

  const body = (numbers: string[]) => ({ numbers, current_carrier: 'AT&T', authorization_name: 'Jane Doe' });

  it('a number in an open port cannot be ported or bought again', async () => {
    const res = await p.rest('POST', '/v1/numbers/port', { key: x.testKey, body: body(['+13125550144', '+13125550145']) });
    expect(res.status, res.text).toBe(201);
    const port = res.body.data;
    const again = await p.rest('POST', '/v1/numbers/port', { key: x.testKey, body: body(['+13125550145']) });
    expectError(again, 409, 'CONFLICT', 'numbers.0');
    expect(again.body.error.details.port_request_id).toBe(port.id);
    expectError(await p.rest('POST', '/v1/numbers/port', { key: y.testKey, body: body(['+13125550144']) }), 409, 'NUMBER_NOT_AVAILABLE', 'numbers.0');
    expectError(await p.rest('POST', '/v1/numbers', { key: x.testKey, body: { number: '+13125550144' } }), 409, 'CONFLICT', 'number');
    expectError(await p.rest('POST', '/v1/numbers', { key: y.testKey, body: { number: '+13125550145' } }), 409, 'NUMBER_NOT_AVAILABLE', 'number');
    // Not offered by search either, and not in the inventory until the port completes.
    const offered = await p.rest('GET', '/v1/numbers/available?country=US&contains=3125550144', { key: y.testKey });
    expect(offered.body.data.map((n: Listing) => n.number)).not.toContain('+13125550144');
    expect((await p.rest('GET', '/v1/numbers', { key: x.testKey })).body.data).toEqual([]);
    const rows = await p.db.query('select id from phone_numbers where port_request_id = $1', [port.id]);
    expectError(await p.rest('GET', `/v1/numbers/${rows.rows[0].id}`, { key: x.testKey }), 404, 'NOT_FOUND');
    expect((await p.rest('GET', `/v1/numbers/port/${port.id}`, { key: x.testKey })).body.data.status).toBe('pending');
  });

  it('two organizations porting the same number at once: exactly one wins', async () => {
    const [rx, ry] = await Promise.all([
      p.rest('POST', '/v1/numbers/port', { key: x.testKey, body: body(['+13125550170', '+13125550171']) }),
      p.rest('POST', '/v1/numbers/port', { key: y.testKey, body: body(['+13125550171', '+13125550172']) }),
    ]);
    expect([rx.status, ry.status].sort(), `${rx.text} ${ry.text}`).toEqual([201, 409]);
    expect((rx.status === 409 ? rx : ry).body.error.code).toBe('NUMBER_NOT_AVAILABLE');
    expect((await p.db.query(`select count(*)::int as n from phone_numbers where number = '+13125550171'`)).rows[0].n).toBe(1);
  });
});

describe('monthly renewals', () => {
  it('bills each new cycle once, catching up on missed ones; released numbers are not renewed', async () => {
    const org = await t.createOrg('enterprise', 'Numbers billing');
    const kept = await buy({ number: (await available({ area_code: '720' })).number }, org.testKey);
    const released = await buy({ number: (await available({ area_code: '720' })).number }, org.testKey);
    // Pretend both were bought on 2025-01-31, three cycles ago or more.
    await t.db.query(`update phone_numbers set billing_anchor_at = '2025-01-31T10:00:00Z', billing_period_start = '2025-01-31T10:00:00Z', billing_period_end = '2025-02-28T10:00:00Z' where id = any($1)`, [[kept.id, released.id]]);
    expect((await t.rest('DELETE', `/v1/numbers/${released.id}`, { key: org.testKey })).status).toBe(204);
    const renewed = await t.app.services.numbers.renewDue();
    expect(renewed).toBeGreaterThanOrEqual(3);
    expect(await t.app.services.numbers.renewDue()).toBe(0);
    const keys = await t.db.query('select idempotency_key from usage_entries where resource_id = $1 order by id', [kept.id]);
    const cycles = keys.rows.map((r) => Number(r.idempotency_key.split(':').pop()));
    expect(cycles).toEqual(Array.from({ length: cycles.length }, (_, i) => i + 1));
    const row = (await t.db.query('select billing_period_start, billing_period_end, billing_cycles from phone_numbers where id = $1', [kept.id])).rows[0];
    expect(row.billing_cycles).toBe(cycles.length);
    expect(row.billing_period_end.getTime()).toBeGreaterThan(Date.now());
    expect(row.billing_period_start.getTime()).toBeLessThanOrEqual(Date.now());
    // Anchored on the 31st: each cycle ends on the 31st, or on the last day of a shorter month.
    const end: Date = row.billing_period_end;
    expect(end.getUTCDate()).toBe(Math.min(31, new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth() + 1, 0)).getUTCDate()));
    const releasedUsage = await t.db.query('select count(*)::int as n from usage_entries where resource_id = $1', [released.id]);
    expect(releasedUsage.rows[0].n).toBe(1);
  });
});
