/**
 * Live notices of events go out when the inserting transaction commits (the `events` statement
 * trigger's NOTIFY), whether or not a relay runs; the outbox relay dispatches each committed event
 * once to its consumers (webhook fan-out, flow triggers) and announces nothing itself.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { newId } from '../src/platform/ids.ts';
import { createLogger } from '../src/platform/logger.ts';
import { EventRelay } from '../src/platform/events/relay.ts';
import type { LiveNotice } from '../src/platform/events/bus.ts';
import { eventually } from './helpers/assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
beforeAll(async () => {
  // No workers: the app runs no relay of its own; the bus (live subscriptions) runs.
  t = await startTestApp({ workers: false, clock: systemClock });
  org = await t.createOrg('enterprise', 'Relay live notices');
});
afterAll(async () => { await t?.close(); });

async function insertEvent(): Promise<string> {
  const id = newId('evt', Date.now());
  await t.db.query(
    `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
     values ($1, $2, 'test', 'message.sent', 'message', $1, 1, '{}', now())`, [id, org.orgId]);
  return id;
}
/** Dispatched: the event's id is off the outbox. */
const dispatched = async (id: string) => (await t.db.query('select 1 from events_outbox where id = $1', [id])).rows.length === 0;

describe('live notices at commit', () => {
  // What a test left on the outbox is dispatched before the next one (the busy relay counts batches).
  afterEach(async () => {
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
    while ((await relay.drainOnce()) > 0) { /* next batch */ }
  });

  it('reach subscribers when the inserting transaction commits, with no relay running (the event still on the outbox)', async () => {
    const notices = t.app.services.bus.subscribe((n) => n.kind === 'event' && n.organizationId === org.orgId);
    try {
      const id = await insertEvent();
      const first = await notices.next();
      expect(first.value).toEqual({ kind: 'event', id, organizationId: org.orgId, mode: 'test', type: 'message.sent', resourceId: id } satisfies LiveNotice);
      expect(await dispatched(id)).toBe(false);
    } finally {
      await notices.return?.();
    }
  });

  it('none for an insert rolled back or a seed inserted already dispatched; one per event when a relay dispatches it', async () => {
    const seen: string[] = [];
    const notices = t.app.services.bus.subscribe((n) => n.kind === 'event' && n.organizationId === org.orgId);
    const reading = (async () => { for await (const n of notices) seen.push(n.id); })();
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
    relay.addConsumer(async () => {});
    await relay.start();
    try {
      const client = await t.db.connect();
      const rolledBack = newId('evt', Date.now());
      try {
        await client.query('begin');
        await client.query(
          `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
           values ($1, $2, 'test', 'message.sent', 'message', $1, 1, '{}', now())`, [rolledBack, org.orgId]);
        await client.query('rollback');
      } finally {
        client.release();
      }
      const seeded = newId('evt', Date.now());
      await t.db.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, dispatched_at)
         values ($1, $2, 'test', 'message.sent', 'message', $1, 1, '{}', now(), now())`, [seeded, org.orgId]);
      const id = await insertEvent();
      await eventually('the committed event dispatched by the relay', async () => ((await dispatched(id)) && seen.includes(id) ? true : undefined));
      // Time for a notice from the relay, if it still sent one.
      await new Promise((r) => setTimeout(r, 300));
      expect(seen).toEqual([id]);
    } finally {
      await relay.stop();
      await notices.return?.();
      await reading;
    }
  });

  it('a statement of many events: every notice arrives once, packed into payloads under the 8,000-byte limit', async () => {
    const listener = await t.db.connect();
    const payloads: string[] = [];
    listener.on('notification', (m) => { if (m.channel === 'events_live' && m.payload) payloads.push(m.payload); });
    await listener.query('listen events_live');
    try {
      const ids = Array.from({ length: 200 }, () => newId('evt', Date.now()));
      const type = 'phone_number.porting.requirements_updated';
      await t.db.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
         select id, $2, 'live', $3, 'phone_number', 'pn_' || id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId, type]);
      const mine = () => payloads.map((p) => JSON.parse(p) as LiveNotice[]).filter((ns) => ns.some((n) => ids.includes(n.id)));
      await eventually('all the notices', () => (mine().flat().length >= ids.length ? true : undefined));
      expect(mine().length).toBeGreaterThan(1);
      for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThan(8000);
      expect(mine().flat().map((n) => n.id).sort()).toEqual([...ids].sort());
      expect(mine().flat()[0]).toEqual({ kind: 'event', id: expect.any(String), organizationId: org.orgId, mode: 'live', type, resourceId: expect.stringMatching(/^pn_evt_/) });
    } finally {
      await listener.query('unlisten events_live');
      listener.release();
    }
  });
});

describe('a busy relay', () => {
  it('lets the events that came in during a drain gather for gatherMs before its next drain: one drain for them, not one each', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const batches = new Map<object, string[]>();
    let held = false;
    // 2.5 s instead of RELAY_GATHER_MS (10), so that the test's own inserts land inside the window
    // (with 1 s it failed once beside a busy loop; the likely cause, not seen: e3 and e4 came after it).
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent'), gatherMs: 2500 });
    relay.addConsumer(async (tx, event) => {
      if (event.organizationId !== org.orgId) return;
      batches.set(tx, [...(batches.get(tx) ?? []), event.id]);
      if (!held) {
        held = true;
        await gate;
      }
    });
    await relay.start();
    try {
      const e1 = await insertEvent();
      await eventually('the drain of e1, held by its consumer', () => (held ? true : undefined));
      const e2 = await insertEvent(); // the relay is busy: told while it drains
      release();
      // e1's drain committed: without the gather the next drain (e2) starts now, before e3 and e4 exist.
      await eventually('e1 dispatched', async () => ((await dispatched(e1)) ? true : undefined));
      const e3 = await insertEvent();
      const e4 = await insertEvent();
      await eventually('e2, e3 and e4 dispatched', async () => ((await dispatched(e2)) && (await dispatched(e3)) && (await dispatched(e4)) ? true : undefined));
      expect([...batches.values()]).toEqual([[e1], [e2, e3, e4]]);
    } finally {
      release();
      await relay.stop();
    }
  });
});

describe('the outbox table', () => {
  it('queues the ids an insert statement made, leaves the event rows untouched when dispatched, and skips seeds inserted already dispatched', async () => {
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
    const consumed: string[] = [];
    relay.addConsumer(async (_tx, event) => { consumed.push(event.id); });
    const ids = [newId('evt', Date.now()), newId('evt', Date.now())];
    const seeded = newId('evt', Date.now());
    await t.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, dispatched_at)
       select id, $2, 'test', 'message.sent', 'message', id, 1, '{}', now(), case when id = $3 then now() end from unnest($1::text[]) as id`,
      [[...ids, seeded], org.orgId, seeded]);
    expect((await t.db.query('select id from events_outbox where id = any($1) order by id', [[...ids, seeded]])).rows.map((r) => r.id)).toEqual([...ids].sort());
    // The row version of each event before dispatch: an UPDATE (marking it dispatched) would make a new one.
    const versions = async () => (await t.db.query('select id, xmin::text as v, ctid::text as c from events where id = any($1) order by id', [ids])).rows;
    const before = await versions();
    while ((await relay.drainOnce()) > 0) { /* next batch */ }
    expect(consumed.filter((id) => ids.includes(id) || id === seeded).sort()).toEqual([...ids].sort());
    expect(await versions()).toEqual(before);
    expect((await t.db.query('select count(*)::int as n from events_outbox where id = any($1)', [ids])).rows[0].n).toBe(0);
  });

  it('drops an outbox row whose event is gone without handing anything to the consumers', async () => {
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
    const consumed: string[] = [];
    relay.addConsumer(async (_tx, event) => { consumed.push(event.id); });
    const gone = newId('evt', Date.now());
    await t.db.query('insert into events_outbox (id) values ($1)', [gone]);
    while ((await relay.drainOnce()) > 0) { /* next batch */ }
    expect(consumed).not.toContain(gone);
    expect((await t.db.query('select 1 from events_outbox where id = $1', [gone])).rows).toHaveLength(0);
  });

  it('a batch whose final delete fails is not dispatched: the COMMIT sent behind it rolls the consumers\' writes back', async () => {
    const poison = newId('evt', Date.now());
    await t.db.query('create table relay_probe (id text primary key)');
    // t.db is the owner; the relay runs as the service's role.
    await t.db.query('grant select, insert on relay_probe to public');
    await t.db.query(`create function relay_poison() returns trigger language plpgsql as $$
      begin if old.id = '${poison}' then raise exception 'poisoned outbox row'; end if; return old; end $$`);
    await t.db.query('create trigger relay_poison before delete on events_outbox for each row execute function relay_poison()');
    await t.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       values ($1, $2, 'test', 'message.sent', 'message', $1, 1, '{}', now())`, [poison, org.orgId]);
    const relay = new EventRelay({ orm: t.app.orm, url: t.databaseUrl, log: createLogger('silent') });
    const hooks: string[] = [];
    relay.addConsumer(async (tx, event) => {
      if (event.id !== poison) return;
      await tx.query('insert into relay_probe (id) values ($1)', [event.id]);
      tx.afterCommit(relay, () => hooks.push('committed'));
      tx.afterRollback(relay, () => hooks.push('rolled back'));
    });
    const probed = async () => (await t.db.query('select 1 from relay_probe where id = $1', [poison])).rows.length;
    try {
      await expect(relay.drainOnce()).rejects.toThrow('poisoned outbox row');
      expect(hooks).toEqual(['rolled back']);
      expect(await probed()).toBe(0);
      expect(await dispatched(poison)).toBe(false);
    } finally {
      await t.db.query('drop trigger relay_poison on events_outbox');
    }
    while ((await relay.drainOnce()) > 0) { /* next batch */ }
    expect(hooks).toEqual(['rolled back', 'committed']);
    expect(await probed()).toBe(1);
    expect(await dispatched(poison)).toBe(true);
  });
});
