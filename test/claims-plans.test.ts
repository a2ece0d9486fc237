/**
 * The due-row claims (a batch of rows locked `for update skip locked` and leased) take at most
 * their batch, whatever plan the server made. They are named statements: each connection plans
 * them once, generically, and keeps that plan until the table's statistics change. A plan made
 * while the table was empty (a queue drains between bursts, and the service's vacuum analyzes it
 * empty) estimated one row everywhere and put the locking subquery on the inner side of a nested
 * loop: rescanned once per row of the table, each rescan locking rows the others had not, so a
 * claim of 96 leased every due row (~1,800 in a voice burst, 200–500 ms a claim: docs/benchmarks.md,
 * voice, session 19). Each check makes that plan (an empty, analyzed table and
 * `plan_cache_mode = force_generic_plan`), fills the table, claims, and rolls back.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIMELINE_CLAIM_SQL } from '../src/modules/voice/sandbox/timeline.ts';
import { CLAIM_SQL } from '../src/modules/messaging/messaging.queue.ts';
import { REPORTS_CLAIM_SQL } from '../src/modules/messaging/messaging.timeline.ts';
import { CLAIM_DUE_SQL } from '../src/modules/webhooks/webhooks.delivery.ts';
import { cloneTestDatabase } from './helpers/testApp.ts';

const DUE = 300;
const BATCH = 10;

let db: Awaited<ReturnType<typeof cloneTestDatabase>>;
let client: pg.Client;

beforeAll(async () => {
  db = await cloneTestDatabase();
  client = new pg.Client({ connectionString: db.ownerUrl }); // ANALYZE needs the owner
  await client.connect();
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

/**
 * Runs `claim` (a named statement) once on the empty, analyzed `table` so that its generic plan is
 * the empty table's, then `fill`s the table with DUE due rows and claims again: the rows claimed,
 * and how many are still due afterwards (`due`: a count of the rows not leased).
 */
async function claimAfterEmptyPlan(o: { name: string; table: string; claim: string; params: unknown[]; fill: string; due: string }): Promise<{ claimed: number; stillDue: number }> {
  await client.query('begin');
  try {
    await client.query('set local plan_cache_mode = force_generic_plan');
    await client.query(`analyze ${o.table}`);
    const first = await client.query({ name: o.name, text: o.claim, values: o.params });
    expect(first.rowCount).toBe(0);
    await client.query(o.fill, [DUE]);
    const { rows } = await client.query({ name: o.name, text: o.claim, values: o.params });
    const left = await client.query<{ n: number }>(o.due);
    return { claimed: rows.length, stillDue: left.rows[0]!.n };
  } finally {
    await client.query('rollback');
  }
}

describe('due-row claims under a generic plan made on an empty table', () => {
  it('the voice sandbox timeline claims its batch, not every due step', async () => {
    const r = await claimAfterEmptyPlan({
      name: 'claims_plans_voice', table: 'voice_sandbox_events', claim: TIMELINE_CLAIM_SQL, params: [BATCH, 15],
      fill: `insert into voice_sandbox_events (call_id, seq, due_at, event) select 'call_' || g, 1, now() - interval '1 second', '{"type":"ringing"}' from generate_series(1, $1::int) g`,
      due: 'select count(*)::int as n from voice_sandbox_events where due_at <= now()',
    });
    expect(r).toEqual({ claimed: BATCH, stillDue: DUE - BATCH });
  });

  it('the messaging delivery queue claims its batch', async () => {
    const r = await claimAfterEmptyPlan({
      name: 'claims_plans_deliveries', table: 'messaging_deliveries', claim: CLAIM_SQL, params: [BATCH, 15],
      fill: `insert into messaging_deliveries (message_id, organization_id, mode, plan, due_at) select 'msg_' || g, 'org_claims', 'test', 'free', now() - interval '1 second' from generate_series(1, $1::int) g`,
      due: 'select count(*)::int as n from messaging_deliveries where due_at <= now()',
    });
    expect(r).toEqual({ claimed: BATCH, stillDue: DUE - BATCH });
  });

  it('the messaging sandbox reports claim their batch', async () => {
    const r = await claimAfterEmptyPlan({
      name: 'claims_plans_reports', table: 'messaging_sandbox_reports', claim: REPORTS_CLAIM_SQL, params: [BATCH, 15],
      fill: `insert into messaging_sandbox_reports (message_id, status, due_at, report) select 'msg_' || g, 'delivered', now() - interval '1 second', '{}' from generate_series(1, $1::int) g`,
      due: 'select count(*)::int as n from messaging_sandbox_reports where due_at <= now()',
    });
    expect(r).toEqual({ claimed: BATCH, stillDue: DUE - BATCH });
  });

  it('the webhook deliveries claim their batch', async () => {
    const r = await claimAfterEmptyPlan({
      name: 'claims_plans_webhooks', table: 'webhook_deliveries', claim: CLAIM_DUE_SQL, params: [new Date(Date.now() + 60_000), new Date(Date.now() + 1_000), BATCH],
      fill: `insert into webhook_deliveries (id, organization_id, mode, url, event_id, event_type, payload, status, attempt, next_attempt_at, created_at, updated_at)
             select 'whd_' || g, 'org_claims', 'test', 'https://example.test/hook', 'evt_' || g, 'message.sent', '{}', 'pending', 0, now() - interval '1 second', now(), now()
               from generate_series(1, $1::int) g`,
      due: 'select count(*)::int as n from webhook_deliveries where locked_until is null',
    });
    expect(r).toEqual({ claimed: BATCH, stillDue: DUE - BATCH });
  });
});
