/**
 * The delivery pipeline's hot statements keep per-row plans on tables the planner has no
 * statistics for. A campaign's drain writes to tables faster than anything analyzes them (a new
 * campaign's recipients, and the messages and events it makes, are unknown to the statistics until
 * the next ANALYZE), and plans built on "one row" estimates read whole tables per statement:
 * the batch outcomes hashed every recipient of the campaign, status changes walked all of the
 * tenant's messages through `messages_from_idx`, and the outbox relay hashed a sequential scan of
 * `events` (docs/benchmarks.md, campaigns, session 11). Each check runs the statement with EXPLAIN
 * (ANALYZE) in a transaction that is rolled back, on a fresh database whose tables were filled and
 * never analyzed (the outbox analyzed, as the service's vacuum does with a table that churns).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HAS_PENDING_SQL, LOCK_PENDING_SQL, RECORD_OUTCOMES_SQL } from '../src/modules/campaigns/campaigns.recipients.ts';
import { TRANSITIONS_SQL } from '../src/modules/messaging/messaging.transitions.ts';
import { OUTBOX_READ_SQL } from '../src/platform/events/relay.ts';
import { preparedName } from '../src/platform/db/sql.ts';
import { cloneTestDatabase } from './helpers/testApp.ts';

const ROWS = 20_000;
const ORG = 'org_plans';
const CAMPAIGN = 'cmp_plans';

let db: Awaited<ReturnType<typeof cloneTestDatabase>>;
let client: pg.Client;

type PlanNode = {
  'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Actual Rows'?: number; 'Actual Loops'?: number; 'Rows Removed by Filter'?: number; Plans?: PlanNode[];
};

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * The plan's nodes of `sql` run with EXPLAIN (ANALYZE), rolled back. The plan is the generic one
 * (no parameter values), as a named prepared statement gets once it has run a few times.
 */
async function explain(sql: string, params: unknown[], before?: string): Promise<PlanNode[]> {
  await client.query('begin');
  try {
    if (before) await client.query(before);
    await client.query('set local plan_cache_mode = force_generic_plan');
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`explain (analyze, format json) ${sql}`, params);
    return nodes(rows[0]!['QUERY PLAN'][0].Plan);
  } finally {
    await client.query('rollback');
  }
}

const scansOf = (plan: PlanNode[], table: string) => plan.filter((n) => n['Relation Name'] === table && n['Node Type'] !== 'ModifyTable');

beforeAll(async () => {
  db = await cloneTestDatabase();
  client = new pg.Client({ connectionString: db.ownerUrl }); // ANALYZE needs the owner
  await client.connect();
  const n = ROWS;
  // One tenant's messages from one sender (what `messages_from_idx` groups), queued.
  await client.query(`insert into messages (id, organization_id, mode, channel, direction, "to", recipients, "from", body, content, status, status_history, metadata, sequence, created_at, updated_at)
    select 'msg_plans' || lpad(g::text, 8, '0'), $1, 'test', 'sms', 'outbound', '+1415' || (2000000 + g)::text, jsonb_build_array('+1415' || (2000000 + g)::text),
           '+14155550100', 'hi', '{}', 'queued', '[]', '{}', 1, now(), now()
      from generate_series(1, $2::int) g`, [ORG, n]);
  // Events (the trigger puts each on the outbox); the outbox keeps the newest 500, analyzed.
  await client.query(`insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
    select 'evt_plans' || lpad(g::text, 8, '0'), $1, 'test', 'message.queued', 'message', 'msg_plans' || lpad(g::text, 8, '0'), 1, '{}', now()
      from generate_series(1, $2::int) g`, [ORG, n]);
  await client.query(`delete from events_outbox where id <= $1`, [`evt_plans${String(n - 500).padStart(8, '0')}`]);
  await client.query('analyze events_outbox');
  // A campaign's frozen audience, all pending.
  await client.query(`insert into campaign_recipients (campaign_id, seq, organization_id, mode, contact_id, address, status, vars)
    select $1, g, $2, 'test', 'con_plans' || g, '+1415' || (2000000 + g)::text, 'pending', '{}' from generate_series(1, $3::int) g`, [CAMPAIGN, ORG, n]);
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

describe('hot statements on tables without statistics', () => {
  it("a batch's outcomes read only the batch's recipients, not the campaign's", async () => {
    const seqs = Array.from({ length: 50 }, (_, i) => 10_001 + i);
    const plan = await explain(RECORD_OUTCOMES_SQL, [
      new Date(), seqs, seqs.map(() => 'sent'), seqs.map(() => null), seqs.map((s) => `msg_out${s}`), seqs.map(() => null), seqs.map(() => null),
      CAMPAIGN, seqs[0], seqs[seqs.length - 1],
    ]);
    const scans = scansOf(plan, 'campaign_recipients');
    expect(scans.length).toBeGreaterThan(0);
    for (const s of scans) expect(s['Actual Rows']! * (s['Actual Loops'] ?? 1)).toBeLessThanOrEqual(seqs.length);
  });

  it("a batch locks only the batch's recipients", async () => {
    const plan = await explain(LOCK_PENDING_SQL, [CAMPAIGN, 10_001, 10_050]);
    const scans = scansOf(plan, 'campaign_recipients');
    expect(scans.length).toBeGreaterThan(0);
    for (const s of scans) expect(s['Actual Rows']! * (s['Actual Loops'] ?? 1)).toBeLessThanOrEqual(50);
  });

  it("the pending check of a campaign near its end does not read the recipients already sent", async () => {
    const plan = await explain(HAS_PENDING_SQL, [CAMPAIGN], `update campaign_recipients set status = 'sent' where campaign_id = '${CAMPAIGN}' and seq <= ${ROWS - 10}`);
    const scans = scansOf(plan, 'campaign_recipients');
    expect(scans.length).toBeGreaterThan(0);
    for (const s of scans) {
      expect(s['Actual Rows']).toBe(1);
      expect(s['Rows Removed by Filter'] ?? 0).toBeLessThan(100);
    }
  });

  it('status changes find their messages by primary key', async () => {
    const ids = Array.from({ length: 50 }, (_, i) => `msg_plans${String(5_001 + i).padStart(8, '0')}`);
    const now = new Date();
    const plan = await explain(TRANSITIONS_SQL, [
      ids, ids.map(() => ORG), ids.map(() => 'test'), ids.map(() => 'sent'), ids.map(() => now.toISOString()), ids.map(() => null),
      ids.map(() => 'sandbox'), ids.map((id) => `sbx_${id}`), ids.map(() => null), ids.map((id) => `evt_t_${id}`), ids.map(() => now),
      ['whatsapp', 'rcs'], ids.map(() => null),
    ]);
    const scans = scansOf(plan, 'messages');
    expect(scans.length).toBeGreaterThan(0);
    for (const s of scans) expect(s['Index Name']).toBe('messages_pkey');
  });

  it('the recipients index (GIN) holds only messages with several recipients', async () => {
    const { rows } = await client.query<{ def: string }>(`select pg_get_indexdef('messages_recipients_idx'::regclass) as def`);
    expect(rows[0]!.def).toContain('WHERE (jsonb_array_length(recipients) > 1)');
  });

  it('the outbox relay reads its batch of events by primary key', async () => {
    // A named prepared statement (sql.ts `prepared`): its generic plan is the one that runs.
    expect(preparedName(OUTBOX_READ_SQL)).toMatch(/^hot_/);
    const plan = await explain(OUTBOX_READ_SQL, [500]);
    const scans = scansOf(plan, 'events');
    expect(scans.length).toBeGreaterThan(0);
    for (const s of scans) expect(s['Index Name']).toBe('events_pkey');
    // …and reads the whole batch.
    expect(Math.max(...scansOf(plan, 'events_outbox').map((s) => s['Actual Rows']!))).toBe(500);
  });
});
