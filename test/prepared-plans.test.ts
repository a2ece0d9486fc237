/**
 * Named batched lookups settle on one generic plan (platform/db/plans.ts): read through sub-selects,
 * their arrays no longer make every custom plan look cheaper than the generic one, so from the
 * sixth execution on a connection PostgreSQL stops planning them. The plain `unnest($1::text[])`
 * form is kept here as the control: planned on every execution.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSENT_CHECK_SQL } from '../src/modules/contacts/consent.check.ts';
import { LOCK_PENDING_SQL, RECORD_OUTCOMES_SQL } from '../src/modules/campaigns/campaigns.recipients.ts';
import { SENDER_LOOKUP_SQL } from '../src/modules/messaging/messaging.batching.ts';
import { DELIVERIES_DUE } from '../src/modules/messaging/messaging.queue.ts';
import { REPORTS_DUE } from '../src/modules/messaging/messaging.timeline.ts';
import { TIMELINE_DUE } from '../src/modules/voice/sandbox/timeline.ts';
import { settleSql } from '../src/platform/jobs/dueTicker.ts';
import { VOICE_NUMBERS_SQL, voiceNumbersRead } from '../src/modules/numbers/numbers.voice.ts';
import { ConsentCheck } from '../src/modules/contacts/consent.check.ts';
import { pairedReadsSql } from '../src/platform/db/pairedReads.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import type { Transaction } from 'kysely';
import type { Scope } from '../src/platform/auth/scope.ts';
import { systemClock } from '../src/platform/clock.ts';
import { preparedName, sqlQuery } from '../src/platform/db/sql.ts';
import { SenderDirectory } from '../src/modules/messaging/messaging.senders.ts';
import { SANDBOX_SENDERS } from '../src/modules/messaging/messaging.model.ts';

let t: TestApp;
let client: pg.Client;
beforeAll(async () => {
  t = await startTestApp({ workers: false });
  client = new pg.Client({ connectionString: t.ownerUrl }); // ANALYZE needs the owner
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await t?.close();
});

/** The values of one execution: one-row arrays by default. */
const lookup = (i: number): unknown[] => [['org_none'], ['test'], [`+1415555${String(i).padStart(4, '0')}`], [null]];

/** Runs `text` as the named statement `name` `times` times; answers its plan counts on this connection. */
async function plans(name: string, text: string, times: number, values: (i: number) => unknown[] = lookup): Promise<{ generic: number; custom: number }> {
  for (let i = 0; i < times; i++) await client.query({ name, text, values: values(i) });
  const { rows: [r] } = await client.query<{ generic_plans: string; custom_plans: string }>(
    'select generic_plans, custom_plans from pg_prepared_statements where name = $1', [name]);
  return { generic: Number(r!.generic_plans), custom: Number(r!.custom_plans) };
}

describe('named batched lookups run one generic plan', () => {
  it('the consent check and the sender lookup stop planning after five executions', async () => {
    expect(await plans('t_consent', CONSENT_CHECK_SQL, 8)).toEqual({ generic: 3, custom: 5 });
    // The sender lookup's fourth array is the sender address (null: the default sender).
    expect(await plans('t_sender', SENDER_LOOKUP_SQL, 8)).toEqual({ generic: 3, custom: 5 });
  });

  it("the voice numbers lookup (every call placed) stops planning too", async () => {
    expect(await plans('t_voice_numbers', VOICE_NUMBERS_SQL, 8, () => [['org_none'], ['test']])).toEqual({ generic: 3, custom: 5 });
  });

  it("a call's consent and numbers reads, paired in one statement, stop planning too", async () => {
    const consent = new ConsentCheck(null as never).readPart('voice');
    const text = pairedReadsSql(consent, voiceNumbersRead);
    expect(await plans('t_call_lookups', text, 8, (i) => [...lookup(i), ['org_none'], ['test']])).toEqual({ generic: 3, custom: 5 });
  });

  it("the delivery queue's settle (retry arrays mostly empty) stops planning too", async () => {
    expect(await plans('t_settle', settleSql(DELIVERIES_DUE), 8, (i) => [[`msg_none_${i}`], [1], [], [], []])).toEqual({ generic: 3, custom: 5 });
  });

  it("the sandbox timelines' settles (voice steps, messaging reports) stop planning too, and the plain form does not", async () => {
    expect(await plans('t_voice_settle', settleSql(TIMELINE_DUE), 8, (i) => [[`call_none_${i}`], [1], [], [], []])).toEqual({ generic: 3, custom: 5 });
    expect(await plans('t_reports_settle', settleSql(REPORTS_DUE), 8, (i) => [[`msg_none_${i}`], ['delivered'], [], [], []])).toEqual({ generic: 3, custom: 5 });
    const plain = settleSql(TIMELINE_DUE).replace(/\(select (\$\d::\w+\[\])\)/g, '$1');
    expect(plain).not.toContain('(select');
    expect(await plans('t_voice_settle_plain', plain, 8, (i) => [[`call_none_${i}`], [1], [], [], []])).toEqual({ generic: 0, custom: 8 });
  });

  it("a campaign batch's lock of its pending rows and its outcomes stop planning too (the range and arrays read through sub-selects)", async () => {
    // A campaign's recipients, analyzed (as the service's vacuum does mid-drain): with the range's
    // values known, a custom plan counts the batch's 50 rows and the generic one a guess ten times larger.
    await client.query(`insert into campaign_recipients (campaign_id, seq, organization_id, mode, contact_id, address, status, vars)
      select 'cmp_generic', g, 'org_none', 'test', 'con_' || g, '+1415' || (3000000 + g)::text, 'pending', '{}' from generate_series(1, 20000) g`);
    await client.query('analyze campaign_recipients');
    const range = (i: number) => ['cmp_generic', 50 * i + 1, 50 * i + 50];
    expect(await plans('t_lock_pending', LOCK_PENDING_SQL, 8, range)).toEqual({ generic: 3, custom: 5 });
    const plain = LOCK_PENDING_SQL.replace('(select $1::text)', '$1').replace('(select $2::int)', '$2').replace('(select $3::int)', '$3');
    expect(await plans('t_lock_pending_plain', plain, 8, range)).toEqual({ generic: 0, custom: 8 });
    // Outcomes of rows that are not pending (the batch ran already): nothing changes.
    const outcomes = (i: number) => [new Date(), [50 * i + 1, 50 * i + 2], ['sent', 'skipped'], [null, 'opted_out'], [`msg_none_${i}`, null], [null, null], [null, null], 'cmp_none', 50 * i + 1, 50 * i + 2];
    expect(await plans('t_outcomes', RECORD_OUTCOMES_SQL, 8, outcomes)).toEqual({ generic: 3, custom: 5 });
    await client.query(`delete from campaign_recipients where campaign_id = 'cmp_generic'`);
  });

  it("the sender lookup inside a caller's transaction (a campaign batch's) runs as that connection's prepared lookup", async () => {
    const senders = new SenderDirectory({ orm: t.app.orm, pool: t.app.pool, clock: systemClock });
    const scope = { organizationId: 'org_none', mode: 'test', plan: 'enterprise', actor: { type: 'system', id: 'system' } } as unknown as Scope;
    const { from, named } = await t.app.orm.em.fork().transactional(async (tx) => {
      const from = await senders.resolve(tx, scope, 'sms', null);
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const names = (await sqlQuery<{ name: string }>(trx, 'select name from pg_prepared_statements')).map((r) => r.name);
      return { from, named: names.includes(preparedName(SENDER_LOOKUP_SQL) ?? '(unnamed)') };
    });
    expect(from).toBe(SANDBOX_SENDERS.sms);
    expect(named).toBe(true);
  });

  it('control: with the arrays as plain parameters, every execution is planned', async () => {
    const plain = CONSENT_CHECK_SQL.replace(/\(select (\$\d::text\[\])\)/g, '$1');
    expect(plain).toContain('unnest($1::text[], $2::text[], $3::text[], $4::text[])');
    expect(await plans('t_consent_plain', plain, 8)).toEqual({ generic: 0, custom: 8 });
  });
});
