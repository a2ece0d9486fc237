/**
 * Voice hot paths shared by concurrent requests and jobs (without workers, so nothing else touches
 * the rows): concurrent POST /v1/voice/calls commit in groups (each call with its `call.initiated`
 * event and its placement — for a test call its row of the sandbox timeline — in one transaction,
 * a bad item failing alone), and gateway events of concurrent jobs apply in one transaction with
 * their events and timers (an event that overtook an earlier one failing alone). The sandbox
 * timeline's ticker (not running without workers) is driven here by hand: `tick()`; the last
 * describe runs it, in an instance of its own with workers, for when it looks.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { newId } from '../src/platform/ids.ts';
import type { CallGateway } from '../src/modules/voice/calls/gateway.ts';
import type { SandboxTimeline } from '../src/modules/voice/sandbox/timeline.ts';
import type { Transaction } from 'kysely';
import { CallRows } from '../src/modules/voice/store/locked.ts';
import { tenantEm } from '../src/platform/db/tenant.ts';
import { sendBeforeCommit, sqlQuery } from '../src/platform/db/sql.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, eventually, VOICE_ENV } from './helpers/voice.ts';

let t: TestApp;
let a: TestOrg;
let from: string;
let gateway: CallGateway;

beforeAll(async () => {
  t = await startTestApp({ workers: false, clock: systemClock, env: VOICE_ENV });
  a = await t.createOrg('enterprise', 'Voice batching');
  from = await buyVoiceNumber(t, a.testKey);
  gateway = (t.app.services as unknown as { callGateway: CallGateway }).callGateway;
});
afterAll(async () => { await t?.close(); });

const place = (body: Record<string, unknown>) => t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { from, ...body } });
/** The transaction that wrote each call's row, its events and its placement: the sandbox's script on the timeline (xmin: nothing updates them without workers). */
async function writers(ids: string[]) {
  const { rows } = await t.db.query(
    `select c.id, c.xmin::text as call_tx,
            (select array_agg(e.xmin::text) from events e where e.resource_id = c.id) as event_tx,
            (select array_agg(distinct p.xmin::text) from voice_sandbox_events p where p.call_id = c.id) as job_tx
       from calls c where c.id = any($1::text[])`, [ids]);
  return rows as { id: string; call_tx: string; event_tx: string[]; job_tx: string[] }[];
}

describe('placing calls concurrently', () => {
  it('answers each caller with its own call; the row, its call.initiated event and its placement (the sandbox script\'s timeline rows) commit together, several calls per commit', async () => {
    const replies = await Promise.all(Array.from({ length: 24 }, (_, i) => place({ to: `+1415555${String(1000 + i)}`, metadata: { n: i } })));
    for (const [i, r] of replies.entries()) {
      expect(r.status, r.text).toBe(201);
      expect(r.body.data).toMatchObject({ to: `+1415555${String(1000 + i)}`, status: 'initiating', metadata: { n: i } });
    }
    const rows = await writers(replies.map((r) => r.body.data.id));
    expect(rows).toHaveLength(24);
    for (const row of rows) {
      expect(row.event_tx).toEqual([row.call_tx]);
      expect(row.job_tx).toEqual([row.call_tx]);
    }
    expect(new Set(rows.map((r) => r.call_tx)).size).toBeLessThan(24);
  });

  it('a call the database refuses fails alone; the calls committed with it are stored', async () => {
    // A lone UTF-16 surrogate passes JSON parsing and validation, but PostgreSQL's jsonb refuses it.
    const bad = place({ to: '+14155552000', metadata: { note: 'x\ud800' } });
    const good = Array.from({ length: 8 }, (_, i) => place({ to: `+1415555${String(2001 + i)}` }));
    const [badReply, ...goodReplies] = await Promise.all([bad, ...good]);
    expect(badReply!.status, badReply!.text).toBeGreaterThanOrEqual(500);
    for (const r of goodReplies) expect(r.status, r.text).toBe(201);
    const { rows } = await t.db.query(`select "to" from calls where organization_id = $1 and "to" like '+14155552%' order by "to"`, [a.orgId]);
    expect(rows.map((r) => r.to)).toEqual(Array.from({ length: 8 }, (_, i) => `+1415555${String(2001 + i)}`));
  });
});

describe('gateway events of concurrent jobs', () => {
  it('apply in one transaction with their events and timers; an event ahead of its turn fails alone and applies later', async () => {
    const placed = await Promise.all(Array.from({ length: 6 }, (_, i) => place({ to: `+1415555${String(3000 + i)}`, max_duration: 600 })));
    const ids = placed.map((r) => r.body.data.id as string);
    // Rings all six, answers the first three, and sends one call's completion before its answer.
    const settled = await Promise.allSettled([
      ...ids.map((callId) => gateway.apply({ callId, seq: 1, type: 'ringing' })),
      ...ids.slice(0, 3).map((callId) => gateway.apply({ callId, seq: 2, type: 'answered' })),
      gateway.apply({ callId: ids[5]!, seq: 3, type: 'completed' }),
    ]);
    expect(settled.slice(0, 9).map((s) => s.status)).toEqual(Array(9).fill('fulfilled'));
    expect(settled[9]).toMatchObject({ status: 'rejected', reason: { name: 'EventTooEarly' } });

    const { rows } = await t.db.query(
      `select c.id, c.status, c.gateway_seq, c.xmin::text as tx, c.steps,
              (select array_agg(e.type order by e.sequence) from events e where e.resource_id = c.id) as events,
              (select array_agg(j.xmin::text) from voice_sandbox_events j where j.call_id = c.id and j.seq = -1) as timer_tx,
              (select array_agg(extract(epoch from j.due_at - c.answered_at)::int) from voice_sandbox_events j where j.call_id = c.id and j.seq = -1) as timer_after,
              (select count(*)::int from pgboss.job j where j.name = 'voice.call-timer' and j.data->'data'->>'callId' = c.id) as timer_jobs
         from calls c where c.id = any($1::text[]) order by c.id`, [ids]);
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const [i, id] of ids.entries()) {
      const row = byId.get(id)!;
      expect(row.status).toBe(i < 3 ? 'in_progress' : 'ringing');
      expect(row.gateway_seq).toBe(i < 3 ? 2 : 1);
      expect(row.events).toEqual(i < 3 ? ['call.initiated', 'call.ringing', 'call.answered'] : ['call.initiated', 'call.ringing']);
      expect(row.steps.filter((s: { type: string }) => s.type === 'status').map((s: { detail: { status: string } }) => s.detail.status))
        .toEqual(i < 3 ? ['initiating', 'ringing', 'in_progress'] : ['initiating', 'ringing']);
      // The max_duration timer of an answered call commits with it as its row of the timeline (not a
      // pg-boss job), due max_duration after the answer.
      expect(row.timer_jobs).toBe(0);
      if (i < 3) {
        expect(row.timer_tx).toEqual([row.tx]);
        expect(Math.abs(row.timer_after[0] - 600)).toBeLessThanOrEqual(2);
      } else {
        expect(row.timer_tx).toBeNull();
      }
    }
    // Every change of the batch in one transaction.
    expect(new Set(rows.map((r) => r.tx)).size).toBe(1);

    // The early completion applies once its turn comes; a repeated event changes nothing.
    await gateway.apply({ callId: ids[5]!, seq: 2, type: 'answered' });
    await gateway.apply({ callId: ids[5]!, seq: 3, type: 'completed' });
    await gateway.apply({ callId: ids[5]!, seq: 3, type: 'completed' });
    const done = await t.rest('GET', `/v1/voice/calls/${ids[5]}`, { key: a.testKey });
    expect(done.body.data).toMatchObject({ status: 'completed', end_reason: 'remote' });
    const { rows: usage } = await t.db.query(`select quantity from usage_entries where resource_id = $1`, [ids[5]]);
    expect(usage).toEqual([{ quantity: 1 }]);
  });

  it('placements of concurrent jobs keep one gateway reference per call', async () => {
    const placed = await Promise.all(Array.from({ length: 5 }, (_, i) => place({ to: `+1415555${String(4000 + i)}` })));
    const ids = placed.map((r) => r.body.data.id as string);
    const scope = systemScope(a.orgId, 'test', 'enterprise', newId('req'));
    await Promise.all([...ids, ids[0]!].map((callId) => gateway.place(scope, callId)));
    const { rows } = await t.db.query(`select id, gateway_reference, status from calls where id = any($1::text[])`, [ids]);
    expect(rows).toHaveLength(5);
    for (const r of rows) expect(r).toMatchObject({ status: 'initiating', gateway_reference: expect.stringMatching(/^SBXCALL/) });
    // The sandbox scheduled each call's script once: its timeline rows are keyed by (call, seq).
    const { rows: steps } = await t.db.query(`select count(*)::int as n from voice_sandbox_events where call_id = any($1::text[]) and seq > 0`, [ids]);
    // One pending step per call: ringing, carrying answered (every other number stays connected).
    expect(steps[0].n).toBe(5);
    const { rows: jobs } = await t.db.query(`select count(*)::int as n from pgboss.job where name like 'voice.%' and data->'data'->>'callId' = any($1::text[])`, [ids]);
    expect(jobs[0].n).toBe(0);
  });
});

describe('the sandbox timeline', () => {
  const timeline = () => (t.app.services as unknown as { sandboxTimeline: SandboxTimeline }).sandboxTimeline;
  // The sandbox's steps (seq ≥ 0); an answered call's max_duration timer is its row with seq -1.
  const steps = async (ids: string[]) => (await t.db.query(`select call_id, seq, attempts, event->>'type' as type, due_at <= now() as due from voice_sandbox_events where call_id = any($1::text[]) and seq >= 0 order by call_id, seq`, [ids])).rows;
  const timers = async (ids: string[]) => (await t.db.query(`select call_id, attempts, extract(epoch from due_at - now()) as in_seconds from voice_sandbox_events where call_id = any($1::text[]) and seq = -1 order by call_id`, [ids])).rows;
  const dueNow = (ids: string[]) => t.db.query(`update voice_sandbox_events set due_at = now() - interval '1 millisecond' where call_id = any($1::text[]) and seq >= 0`, [ids]);
  const drain = async () => { while (await timeline().tick() > 0); };
  // The earlier tests' calls left their placements and steps: out of the way.
  beforeEach(async () => { await t.db.query('delete from voice_sandbox_events'); });

  it('test calls commit with their sandbox script\'s first step; the ticker applies the steps in batches, each step once, its row deleted with the change it made and the next step\'s row added by it', async () => {
    const placed = await Promise.all(Array.from({ length: 4 }, (_, i) => place({ to: `+1415555${String(5000 + i)}` })));
    const ids = placed.map((r) => r.body.data.id as string);
    // Placed as they committed: the reference noted, the script's first step waiting for its time,
    // carrying the second with its due time (the placement's, plus the ring and answer times).
    const { rows: calls1 } = await t.db.query(`select status, gateway_reference from calls where id = any($1::text[])`, [ids]);
    for (const c of calls1) expect(c).toMatchObject({ status: 'initiating', gateway_reference: expect.stringMatching(/^SBXCALL/) });
    expect((await steps(ids)).map((s) => [s.seq, s.type])).toEqual(ids.sort().flatMap(() => [[1, 'ringing']]));
    const { rows: planned } = await t.db.query(
      `select (p.event->'then'->0->>'dueMs')::float8 - extract(epoch from c.created_at) * 1000 as after_ms, p.event->'then'->0->'event'->>'type' as type
         from voice_sandbox_events p join calls c on c.id = p.call_id where p.call_id = any($1::text[])`, [ids]);
    for (const p of planned) expect(p).toEqual({ after_ms: expect.closeTo(150, 0), type: 'answered' });
    await dueNow(ids);
    // One look, not a drain: the answer's rows it adds fall due 150 ms after the placement, already
    // past on a loaded machine, and a second look would apply them too.
    await timeline().tick();
    // Ringing applied: its row went and the answer's row came with the same change, due when planned.
    expect((await steps(ids)).map((s) => [s.seq, s.type])).toEqual(ids.flatMap(() => [[2, 'answered']]));
    const { rows: ringing } = await t.db.query(`select count(*)::int as n from calls where id = any($1::text[]) and status = 'ringing'`, [ids]);
    expect(ringing[0].n).toBe(4);
    await dueNow(ids);
    await drain();
    expect(await steps(ids)).toEqual([]);
    const { rows } = await t.db.query(
      `select c.status, c.gateway_seq, (select array_agg(e.type order by e.sequence) from events e where e.resource_id = c.id) as events from calls c where c.id = any($1::text[])`, [ids]);
    for (const r of rows) expect(r).toEqual({ status: 'in_progress', gateway_seq: 2, events: ['call.initiated', 'call.ringing', 'call.answered'] });
  });

  it('a step claimed by an instance that died is due again once its lease lapses and applies once; a replayed step changes nothing', async () => {
    const id = (await place({ to: '+14155556000' })).body.data.id as string;
    await dueNow([id]);
    // The claim of an instance that then dies: the rows are leased, nothing applied.
    await t.db.query(`update voice_sandbox_events set due_at = now() + interval '15 seconds', attempts = attempts + 1 where call_id = $1`, [id]);
    expect(await timeline().tick()).toBe(0);
    expect((await t.db.query(`select status from calls where id = $1`, [id])).rows[0].status).toBe('initiating');
    await dueNow([id]); // the lease lapsed
    await drain();
    await dueNow([id]); // ringing added the answer's row
    await drain();
    expect(await steps([id])).toEqual([]);
    // The same step stored again (a placement re-run after a crash) is ignored, and its row goes.
    await t.db.query(`insert into voice_sandbox_events (call_id, seq, event) values ($1, 1, '{"type":"ringing","callId":"x","seq":1}')`, [id]);
    await drain();
    expect(await steps([id])).toEqual([]);
    const { rows } = await t.db.query(`select type from events where resource_id = $1 order by sequence`, [id]);
    expect(rows.map((r) => r.type)).toEqual(['call.initiated', 'call.ringing', 'call.answered']);
  });

  it('a placement row (a gateway without a script) is placed by the ticker, which schedules the script', async () => {
    const id = (await place({ to: '+14155556002' })).body.data.id as string;
    await t.db.query('delete from voice_sandbox_events where call_id = $1', [id]);
    await t.db.query('update calls set gateway_reference = null where id = $1', [id]);
    await t.db.query(`insert into voice_sandbox_events (call_id, seq, event) values ($1, 0, jsonb_build_object('type', 'place', 'organizationId', $2::text, 'mode', 'test', 'plan', 'enterprise', 'requestId', 'req_x'))`, [id, a.orgId]);
    expect(await timeline().tick()).toBe(1);
    expect((await t.db.query('select gateway_reference from calls where id = $1', [id])).rows[0].gateway_reference).toMatch(/^SBXCALL/);
    expect((await steps([id])).map((s) => [s.seq, s.type])).toEqual([[1, 'ringing']]);
  });

  it('a script runs as a chain, one pending step per call; a call hung up meanwhile schedules nothing more', async () => {
    const [full, cut] = await Promise.all([place({ to: '+15005550009' }), place({ to: '+15005550009' })]).then((r) => r.map((x) => x.body.data.id as string)) as [string, string];
    const seen: string[][] = [];
    for (let round = 0; round < 6 && (await steps([full, cut])).length > 0; round++) {
      seen.push((await steps([full, cut])).map((s) => `${s.call_id === full ? 'full' : 'cut'}:${s.seq}:${s.type}`).sort());
      if (round === 1) expect((await t.rest('POST', `/v1/voice/calls/${cut}/hangup`, { key: a.testKey })).status).toBe(200);
      await dueNow([full, cut]);
      await timeline().tick(); // one look per round: the step it adds may already be due (150 ms after the placement)
    }
    // Ringing, then the answer (the cut call was hung up while ringing: its answer changes nothing
    // and ends its chain), the key, the hangup.
    expect(seen).toEqual([['cut:1:ringing', 'full:1:ringing'], ['cut:2:answered', 'full:2:answered'], ['full:3:dtmf'], ['full:4:completed']]);
    const { rows } = await t.db.query(`select c.id, c.status, c.end_reason, c.gateway_seq, (select array_agg(e.type order by e.sequence) from events e where e.resource_id = c.id) as events from calls c where c.id = any($1::text[])`, [[full, cut]]);
    expect(rows.find((r) => r.id === full)).toMatchObject({ status: 'completed', end_reason: 'remote', gateway_seq: 4, events: ['call.initiated', 'call.ringing', 'call.answered', 'call.completed'] });
    expect(rows.find((r) => r.id === cut)).toMatchObject({ status: 'cancelled', gateway_seq: 1, events: ['call.initiated', 'call.ringing', 'call.completed'] });
  });

  it('a step due before its turn waits for it: it stays, due again shortly, and applies after the earlier one', async () => {
    const id = (await place({ to: '+14155556001' })).body.data.id as string;
    // The answer's row before ringing was applied (a gateway whose events overtake each other).
    await t.db.query(`insert into voice_sandbox_events (call_id, seq, due_at, event) values ($1, 2, now() - interval '1 millisecond', jsonb_build_object('type', 'answered', 'callId', $1::text, 'seq', 2))`, [id]);
    // Ringing (due 50 ms after placing) must not fall due too on a slow machine before the tick.
    await t.db.query(`update voice_sandbox_events set due_at = now() + interval '1 hour' where call_id = $1 and seq = 1`, [id]);
    await timeline().tick();
    expect(await steps([id])).toEqual([
      { call_id: id, seq: 1, attempts: 0, type: 'ringing', due: false },
      { call_id: id, seq: 2, attempts: 1, type: 'answered', due: false },
    ]);
    await dueNow([id]);
    await drain();
    expect(await steps([id])).toEqual([]);
    expect((await t.db.query(`select status from calls where id = $1`, [id])).rows[0].status).toBe('in_progress');
  });

  it('an answered call\'s max_duration is its timer row: it ends the call once when due (a lapsed claim fires again, once), and goes with an earlier end', async () => {
    const placed = await Promise.all([place({ to: '+14155556010', max_duration: 30 }), place({ to: '+14155556011', max_duration: 30 }), place({ to: '+14155556012', max_duration: 30 })]);
    const [a1, a2, a3] = placed.map((r) => r.body.data.id as string) as [string, string, string];
    await dueNow([a1, a2, a3]);
    await drain();
    await dueNow([a1, a2, a3]);
    await drain();
    const answered = await timers([a1, a2, a3]);
    expect(answered.map((r) => r.call_id)).toEqual([a1, a2, a3].sort());
    for (const r of answered) expect(Math.abs(Number(r.in_seconds) - 30)).toBeLessThanOrEqual(3);
    // a3 hangs up first: its timer row goes with the change that ends it.
    expect((await t.rest('POST', `/v1/voice/calls/${a3}/hangup`, { key: a.testKey })).status).toBe(200);
    expect((await timers([a3]))).toEqual([]);
    // a1's timer claimed by an instance that then died (leased, nothing applied), a2's due now.
    await t.db.query(`update voice_sandbox_events set due_at = now() + interval '15 seconds', attempts = attempts + 1 where call_id = $1 and seq = -1`, [a1]);
    await t.db.query(`update voice_sandbox_events set due_at = now() - interval '1 millisecond' where call_id = $1 and seq = -1`, [a2]);
    await drain();
    const status = async (id: string) => (await t.db.query(`select status, end_reason, steps from calls where id = $1`, [id])).rows[0];
    expect(await status(a2)).toMatchObject({ status: 'completed', end_reason: 'max_duration' });
    expect((await status(a1)).status).toBe('in_progress');
    expect(await timers([a2])).toEqual([]);
    // The lease lapses: a1 ends by its timer, once; the same row stored again (a replay) changes nothing.
    await t.db.query(`update voice_sandbox_events set due_at = now() - interval '1 millisecond' where call_id = $1 and seq = -1`, [a1]);
    await drain();
    await t.db.query(`insert into voice_sandbox_events (call_id, seq, event) values ($1, -1, '{"type":"timer","kind":"max_duration"}')`, [a1]);
    await drain();
    expect(await timers([a1])).toEqual([]);
    const ended = await status(a1);
    expect(ended).toMatchObject({ status: 'completed', end_reason: 'max_duration' });
    expect(ended.steps.filter((s: { type: string }) => s.type === 'max_duration_reached')).toHaveLength(1);
    const { rows: events } = await t.db.query(`select type from events where resource_id = $1 order by sequence`, [a1]);
    expect(events.map((r) => r.type)).toEqual(['call.initiated', 'call.ringing', 'call.answered', 'call.completed']);
    const { rows: jobs } = await t.db.query(`select count(*)::int as n from pgboss.job where name = 'voice.call-timer' and data->'data'->>'callId' = any($1::text[])`, [[a1, a2, a3]]);
    expect(jobs[0].n).toBe(0);
  });
});

describe('locked call writes', () => {
  it('send only what changed: new steps are appended to the stored array, a replaced array is written whole, an unchanged call not at all', async () => {
    const [one, two, three] = await Promise.all([1, 2, 3].map(async (i) => (await place({ to: `+1415555${String(7000 + i)}` })).body.data.id as string)) as [string, string, string];
    const rows = new CallRows({ orm: t.app.orm, pool: t.app.pool, jobs: { insertStatement: () => { throw new Error('no timers here'); } }, timerJob: 'unused' });
    const tenant = { organizationId: a.orgId, mode: 'test' as const };
    const stored = async (id: string) => (await t.db.query(`select steps, sip_code, xmin::text as tx from calls where id = $1`, [id])).rows[0];
    const untouched = await stored(three);
    // A step stored on `one` before the lock: it stays ahead of the appended one.
    await t.db.query(`update calls set steps = steps || '[{"at":"2026-01-01T00:00:00.000Z","type":"elsewhere"}]'::jsonb where id = $1`, [one]);
    await tenantEm(t.app.orm, tenant).transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const locked = await rows.lock(trx, tenant, [one, two, three]);
      const before = rows.snapshot(locked);
      const [c1, c2] = [locked.find((c) => c.id === one)!, locked.find((c) => c.id === two)!];
      c1.steps = [...c1.steps, { at: '2026-01-02T00:00:00.000Z', type: 'added' }];
      c2.sipCode = 486;
      await rows.write(trx, locked, before, { events: [], usage: [], timers: [], consumed: [], timeline: [], after: [] });
    });
    expect((await stored(one)).steps.map((s: { type: string }) => s.type)).toEqual(['status', 'elsewhere', 'added']);
    expect(await stored(two)).toMatchObject({ sip_code: 486 });
    expect((await stored(two)).steps.map((s: { type: string }) => s.type)).toEqual(['status']);
    expect(await stored(three)).toEqual(untouched);
    // Not an extension of what was read (a step taken out): the array is written whole.
    await tenantEm(t.app.orm, tenant).transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const locked = await rows.lock(trx, tenant, [one, two]);
      const before = rows.snapshot(locked);
      const c1 = locked.find((c) => c.id === one)!;
      c1.steps = c1.steps.filter((s) => s.type !== 'elsewhere');
      locked.find((c) => c.id === two)!.steps = [...locked.find((c) => c.id === two)!.steps, { at: '2026-01-03T00:00:00.000Z', type: 'added' }];
      await rows.write(trx, locked, before, { events: [], usage: [], timers: [], consumed: [], timeline: [], after: [] });
    });
    expect((await stored(one)).steps.map((s: { type: string }) => s.type)).toEqual(['status', 'added']);
    expect((await stored(two)).steps.map((s: { type: string }) => s.type)).toEqual(['status', 'added']);
  });
});

describe('a locked change\'s write sent with its COMMIT', () => {
  const nothing = () => ({ events: [], usage: [], timers: [], consumed: [], timeline: [], after: [] });
  it('commits with the transaction; when it fails the transaction stores nothing though its COMMIT answered; it never runs outside the transaction that locked the calls', async () => {
    const id = (await place({ to: '+14155557101' })).body.data.id as string;
    const rows = new CallRows({ orm: t.app.orm, pool: t.app.pool, jobs: { insertStatement: () => { throw new Error('no timers here'); } }, timerJob: 'unused' });
    const tenant = { organizationId: a.orgId, mode: 'test' as const };
    const sipCode = async () => (await t.db.query(`select sip_code from calls where id = $1`, [id])).rows[0].sip_code as number | null;
    /** A transaction that locks the call, runs `also`, and sends the call's change (sip_code) last with sendBeforeCommit. */
    const change = async (code: number, txidOf: (own: string | null) => string | null, also?: (trx: Transaction<unknown>) => Promise<unknown>) => {
      let sent: Promise<unknown> | undefined;
      let statement: { sql: string; params: unknown[] } | undefined;
      await tenantEm(t.app.orm, tenant).transactional(async (tx) => {
        const trx = tx.getTransactionContext<Transaction<unknown>>()!;
        const { calls, txid } = await rows.lockTx(trx, tenant, [id]);
        expect(txid).toMatch(/^\d+$/);
        await also?.(trx);
        const before = rows.snapshot(calls);
        calls[0]!.sipCode = code;
        const prepared = (await rows.statement(calls, before, nothing(), txidOf(txid)))!;
        expect(prepared.guarded).toBe(true);
        statement = prepared;
        sent = sendBeforeCommit(trx, prepared.sql, prepared.params);
      });
      return { sent: sent!, statement: statement! };
    };
    const committed = await change(487, (own) => own);
    await committed.sent;
    expect(await sipCode()).toBe(487);
    // Guarded for another transaction: it fails, and with it everything the transaction did
    // (here an earlier update), although the ORM's COMMIT answered without an error.
    const failed = await change(481, () => '1', (trx) => sqlQuery(trx, `update calls set sip_code = 480 where id = $1`, [id]));
    await expect(failed.sent).rejects.toThrow(/division by zero/);
    expect(await sipCode()).toBe(487);
    // The committed statement sent again on its own, after its transaction: refused, nothing stored.
    await t.db.query(`update calls set sip_code = null where id = $1`, [id]);
    await expect(t.db.query(committed.statement.sql, committed.statement.params)).rejects.toThrow(/division by zero/);
    expect(await sipCode()).toBeNull();
  });
});

describe('the sandbox timeline, running', () => {
  // Its own instance with workers (the ticker runs) and a regular look a minute apart: only the
  // due times of the steps this instance scheduled can make the loop look sooner.
  let w: TestApp;
  let org: TestOrg;
  let number: string;
  beforeAll(async () => {
    w = await startTestApp({ workers: true, clock: systemClock, env: { ...VOICE_ENV, SANDBOX_CALL_TICK_MS: '60000' } });
    org = await w.createOrg('enterprise', 'Voice timeline wakes');
    number = await buyVoiceNumber(w, org.testKey);
  });
  afterAll(async () => { await w?.close(); });

  it('looks when each step of a call\'s script falls due, not only its first: a call rings and is answered long before the next regular look', async () => {
    const placed = await Promise.all(['+14155558001', '+14155558002'].map((to) => w.rest('POST', '/v1/voice/calls', { key: org.testKey, body: { from: number, to } })));
    const ids = placed.map((r) => r.body.data.id as string);
    // Ringing after 50 ms, the answer 100 ms later (VOICE_ENV): both applied within seconds, not a minute.
    const answered = await eventually('both calls answered', async () => {
      const { rows } = await w.db.query(`select status from calls where id = any($1::text[])`, [ids]);
      return rows.length === 2 && rows.every((r) => r.status === 'in_progress') ? rows : undefined;
    }, 10_000);
    expect(answered).toHaveLength(2);
    const { rows: left } = await w.db.query(`select count(*)::int as n from voice_sandbox_events where call_id = any($1::text[]) and seq >= 0`, [ids]);
    expect(left[0].n).toBe(0);
  });
});
