/**
 * Messaging's delivery queue (messaging.queue.ts) on its own, against the real database: rows
 * claimed when due, retried with backoff, dropped after their attempts, a slow batch's lease
 * extended so another instance does not send it again, a row claimed again after a lapsed lease
 * left to its new claimer, a paced row moved to its slot, and rows the accepting instance inserted
 * already claimed and hands to its own loops after the commit (no claim). The sender here is a recording
 * target instead of MessageDelivery (whose behaviour the messaging-* tests cover end to end).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Scope } from '../src/platform/auth/scope.ts';
import { sqlClient } from '../src/platform/db/sql.ts';
import { createLogger } from '../src/platform/logger.ts';
import { DELIVERY_INSERT_ROWS, DELIVERY_INSERT_TYPES, DeliveryQueue, deliveriesInsert, type DeliveryTarget, type HandedDelivery } from '../src/modules/messaging/messaging.queue.ts';
import { rowsParams } from '../src/platform/db/rowsets.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
const queues: DeliveryQueue[] = [];
beforeAll(async () => { t = await startTestApp({ workers: false }); });
afterEach(async () => {
  await Promise.all(queues.splice(0).map((q) => q.stop()));
  await t.db.query('delete from messaging_deliveries');
});
afterAll(async () => { await t?.close(); });

const log = createLogger('silent');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const messageId = () => `msg_queue_test_${process.pid}_${++n}`;

async function startQueue(target: DeliveryTarget, o: { leaseSeconds?: number; sendAttempts?: number } = {}): Promise<DeliveryQueue> {
  const q = new DeliveryQueue({
    pool: t.db, url: t.databaseUrl, log, connectTimeoutMs: 5000, batch: 8, loops: 1, tickMs: 50,
    sendAttempts: o.sendAttempts ?? 3, retryDelaySeconds: 0.1, leaseSeconds: o.leaseSeconds ?? 20,
  });
  q.bind(target);
  queues.push(q);
  await q.start();
  return q;
}

async function queueRow(id: string): Promise<void> {
  await t.db.query(`insert into messaging_deliveries (message_id, organization_id, mode, plan, request_id) values ($1, 'org_queue_test', 'test', 'enterprise', 'req_queue_test')`, [id]);
}
const rowOf = async (id: string) => (await t.db.query<{ attempts: number; paced: boolean; due_in_ms: number }>(
  'select attempts, paced, (extract(epoch from due_at - now()) * 1000)::float8 as due_in_ms from messaging_deliveries where message_id = $1', [id])).rows[0];

describe('the delivery queue', () => {
  it('hands a due row to the target with its scope and first attempt, and deletes it once delivered', async () => {
    const calls: { scope: Scope; id: string; attempt: number; paced: boolean }[] = [];
    await startQueue({ deliver: async (scope, id, attempt, paced) => { calls.push({ scope, id, attempt, paced }); return false; } });
    const id = messageId();
    await queueRow(id);
    await eventually('the row to be delivered and deleted', async () => (calls.length === 1 && !(await rowOf(id)) ? true : undefined));
    expect(calls[0]).toMatchObject({ id, attempt: 0, paced: false, scope: { organizationId: 'org_queue_test', mode: 'test', plan: 'enterprise', requestId: 'req_queue_test' } });
  });

  it('retries a failed delivery with backoff, then drops the row after its attempts', async () => {
    const attempts: number[] = [];
    await startQueue({ deliver: async (_s, _id, attempt) => { attempts.push(attempt); throw new Error('provider down'); } }, { sendAttempts: 3 });
    const id = messageId();
    await queueRow(id);
    await eventually('the row to be dropped', async () => (attempts.length === 3 && !(await rowOf(id)) ? true : undefined));
    expect(attempts).toEqual([0, 1, 2]);
    await sleep(300);
    expect(attempts).toHaveLength(3);
  });

  it('a failure that succeeds on retry is delivered once more and then deleted', async () => {
    const attempts: number[] = [];
    await startQueue({ deliver: async (_s, _id, attempt) => { attempts.push(attempt); if (attempt === 0) throw new Error('once'); return false; } });
    const id = messageId();
    await queueRow(id);
    await eventually('the row to be retried and deleted', async () => (attempts.length === 2 && !(await rowOf(id)) ? true : undefined));
    expect(attempts).toEqual([0, 1]);
  });

  it('extends the lease of a slow batch: another instance does not claim it meanwhile', async () => {
    const id = messageId();
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const first: string[] = [];
    const second: string[] = [];
    await startQueue({ deliver: async (_s, m) => { first.push(m); await held; return false; } }, { leaseSeconds: 1 });
    await queueRow(id);
    try {
      await eventually('the first instance to claim it', () => (first.length === 1 ? true : undefined));
      await startQueue({ deliver: async (_s, m) => { second.push(m); return false; } }, { leaseSeconds: 1 });
      // Three leases long: without extensions the row would be due again twice over.
      await sleep(3000);
      expect((await rowOf(id))?.attempts).toBe(1);
      expect(second).toEqual([]);
    } finally {
      release();
    }
    await eventually('the row to be deleted', async () => (!(await rowOf(id)) ? true : undefined));
    expect(second).toEqual([]);
  });

  it('a row claimed again after its lease lapsed is left to its new claim by the old one', async () => {
    const id = messageId();
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    let calls = 0;
    await startQueue({ deliver: async () => { calls++; await held; return false; } });
    await queueRow(id);
    try {
      await eventually('the claim', () => (calls === 1 ? true : undefined));
      // Another instance claimed it after the lease lapsed (its count moved on) and is still sending.
      await t.db.query(`update messaging_deliveries set attempts = attempts + 1, due_at = now() + interval '1 minute' where message_id = $1`, [id]);
    } finally {
      release();
    }
    await sleep(300);
    expect(await rowOf(id)).toMatchObject({ attempts: 2 });
  });

  it('a delivery moved to a paced slot is left there by the settle, and runs paced in its slot', async () => {
    const id = messageId();
    const calls: { attempt: number; paced: boolean }[] = [];
    const q: DeliveryQueue = await startQueue({
      deliver: async (scope, m, attempt, paced) => {
        calls.push({ attempt, paced });
        if (paced) return false;
        await sqlClient(t.app.orm).transaction().execute((trx) => q.deferWithin(trx, scope, m, new Date(Date.now() + 800)));
        return true;
      },
    });
    await queueRow(id);
    await eventually('the row to be moved to its slot', async () => {
      const row = await rowOf(id);
      return calls.length === 1 && row?.paced ? row : undefined;
    });
    expect((await rowOf(id))!.attempts).toBe(0);
    await eventually('the paced delivery and the row deleted', async () => (calls.length === 2 && !(await rowOf(id)) ? true : undefined));
    expect(calls).toEqual([{ attempt: 0, paced: false }, { attempt: 0, paced: true }]);
  });

  /** Inserts delivery rows as the acceptance statement does (deliveriesInsert), with `lease` seconds. */
  async function insertRows(ids: readonly string[], lease: number): Promise<HandedDelivery[]> {
    const rows = ids.map((id) => ({ message_id: id, organization_id: 'org_queue_test', mode: 'test' as const, plan: 'enterprise' as const, request_id: 'req_queue_test', trace_parent: null }));
    await t.db.query(deliveriesInsert(1), rowsParams(DELIVERY_INSERT_ROWS, DELIVERY_INSERT_TYPES, rows.map((r) => ({ ...r, lease }))));
    return rows;
  }

  it('rows inserted already claimed and handed over after their commit are sent without a claim, then deleted', async () => {
    const calls: { id: string; attempt: number; paced: boolean }[] = [];
    const q = await startQueue({ deliver: async (_s, id, attempt, paced) => { calls.push({ id, attempt, paced }); return false; } });
    const lease = q.handOffLease(3);
    expect(lease).toBe(20);
    const ids = [messageId(), messageId(), messageId()];
    const rows = await insertRows(ids, lease);
    // Claimed for this instance: attempts 1, due only once the lease lapses (no loop claims them before).
    for (const id of ids) {
      const row = await rowOf(id);
      expect(row?.attempts).toBe(1);
      expect(row!.due_in_ms).toBeGreaterThan(15_000);
    }
    await sleep(200);
    expect(calls).toEqual([]);
    q.handOff(rows);
    await eventually('the handed rows to be sent and deleted', async () => (calls.length === 3 && (await Promise.all(ids.map(rowOf))).every((r) => !r) ? true : undefined));
    expect(calls.map((c) => c.id).sort()).toEqual([...ids].sort());
    expect(calls.every((c) => c.attempt === 0 && !c.paced)).toBe(true);
  });

  it('a row inserted claimed but never handed over (its transaction died with the process) is claimed once its lease lapses', async () => {
    const calls: number[] = [];
    const q = await startQueue({ deliver: async (_s, _id, attempt) => { calls.push(attempt); return false; } }, { leaseSeconds: 1 });
    const [id] = [messageId()];
    await insertRows([id!], q.handOffLease(1));
    await sleep(400);
    expect(calls).toEqual([]);
    await eventually('the claim after the lease', async () => (calls.length === 1 && !(await rowOf(id!)) ? true : undefined));
    expect(calls).toEqual([1]);
  });

  it('without running loops the rows are inserted due now (lease 0), for any instance to claim', async () => {
    const idle = new DeliveryQueue({ pool: t.db, url: t.databaseUrl, log, connectTimeoutMs: 5000, batch: 8, loops: 1, sendAttempts: 3, retryDelaySeconds: 1 });
    idle.bind({ deliver: async () => false });
    expect(idle.handOffLease(1)).toBe(0);
    const id = messageId();
    await insertRows([id], 0);
    const row = await rowOf(id);
    expect(row?.attempts).toBe(0);
    expect(row!.due_in_ms).toBeLessThanOrEqual(0);
  });

  it('hands over at most four batches per loop: past that the rows are inserted due now', async () => {
    const q = await startQueue({ deliver: async () => { await sleep(50); return false; } });
    expect(q.handOffLease(8 * 4)).toBe(20);
    expect(q.handOffLease(8 * 4 + 1)).toBe(0);
  });

  it('pending: the messages that still have a row', async () => {
    const [a, b] = [messageId(), messageId()];
    await queueRow(a);
    expect(await new DeliveryQueue({ pool: t.db, url: t.databaseUrl, log, connectTimeoutMs: 5000, batch: 8, loops: 1, sendAttempts: 3, retryDelaySeconds: 1 }).pending([a, b])).toEqual(new Set([a]));
  });
});
