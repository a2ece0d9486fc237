/**
 * The carriers' send-once record (src/providers/messaging/carrierSends.ts) on PostgreSQL: what a
 * later attempt through any connector learns from it (a new send, the recorded one, a send pinned
 * to the connector that accepted part of it, one in doubt), concurrent begins of one message by two
 * connectors (one wins), and receipts: unknown ids, the message's outcome once every segment is
 * delivered or one failed, other spellings of the id, and repeats that answer the outcome again.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgCarrierSendStore } from '../src/providers/messaging/carrierSends.ts';
import { cloneTestDatabase } from './helpers/testApp.ts';

let db: Awaited<ReturnType<typeof cloneTestDatabase>>;
let pool: pg.Pool;
let store: PgCarrierSendStore;

beforeAll(async () => {
  db = await cloneTestDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 4 });
  store = new PgCarrierSendStore(pool);
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

let n = 0;
const message = () => `msg_store${String(++n).padStart(4, '0')}`;

describe('begin', () => {
  it('records a new send once; a second attempt anywhere is in doubt until the outcome is recorded', async () => {
    const id = message();
    expect(await store.begin(id, 'conn_a', 7)).toEqual({ kind: 'new' });
    expect(await store.begin(id, 'conn_a', 8)).toEqual({ kind: 'in_doubt', connectorId: 'conn_a' });
    expect(await store.begin(id, 'conn_b', 9)).toEqual({ kind: 'in_doubt', connectorId: 'conn_a' });
  });

  it('lets any connector send again what nothing accepted', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.release(id, 'conn_a');
    expect(await store.begin(id, 'conn_b', 2)).toEqual({ kind: 'new' });
  });

  it('answers the recorded send, with its connector, to every later attempt', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.finish(id, 'conn_a', ['S1', 'S2']);
    expect(await store.begin(id, 'conn_b', 2)).toEqual({ kind: 'sent', connectorId: 'conn_a', providerMessageId: 'S1' });
  });

  it('pins a partly accepted send to its connector, which resumes it with the same reference', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 42);
    await store.partial(id, 'conn_a', ['S1', null, 'S3']);
    expect(await store.begin(id, 'conn_b', 5)).toEqual({ kind: 'pinned', connectorId: 'conn_a' });
    expect(await store.begin(id, 'conn_a', 6)).toEqual({ kind: 'resume', ref: 42, parts: ['S1', null, 'S3'] });
  });

  it('keeps a refused send from being sent again', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.failed(id, 'conn_a');
    expect(await store.begin(id, 'conn_b', 2)).toEqual({ kind: 'in_doubt', connectorId: 'conn_a' });
  });

  it('lets exactly one of two concurrent connectors begin a message', async () => {
    const ids = Array.from({ length: 20 }, message);
    const results = await Promise.all(ids.flatMap((id) => [store.begin(id, 'conn_a', 1), store.begin(id, 'conn_b', 1)]));
    for (let i = 0; i < ids.length; i++) {
      const pair = [results[2 * i]!, results[2 * i + 1]!];
      expect(pair.filter((r) => r.kind === 'new'), ids[i]).toHaveLength(1);
      expect(pair.filter((r) => r.kind === 'in_doubt'), ids[i]).toHaveLength(1);
    }
  });
});

describe('receipt', () => {
  it('answers unknown for an id not recorded (yet)', async () => {
    expect(await store.receipt({ connectorId: 'conn_a', smscIds: ['nope'], outcome: 'delivered', errorCode: null })).toEqual({ kind: 'unknown' });
  });

  it('decides delivered once every segment is, and answers it again on a repeat', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.finish(id, 'conn_a', ['R1', 'R2', 'R3']);
    const d = (smscIds: string[]) => store.receipt({ connectorId: 'conn_a', smscIds, outcome: 'delivered', errorCode: null });
    expect(await d(['R1'])).toEqual({ kind: 'applied', messageId: id, providerMessageId: 'R1' });
    const [second, third] = await Promise.all([d(['R2']), d(['R3'])]);
    expect([second, third].filter((r) => 'status' in r && r.status === 'delivered')).toHaveLength(1);
    expect(await d(['R3'])).toEqual({ kind: 'repeat', messageId: id, providerMessageId: 'R1', status: 'delivered' });
    // Another connector's id space: unknown there.
    expect(await store.receipt({ connectorId: 'conn_b', smscIds: ['R1'], outcome: 'delivered', errorCode: null })).toEqual({ kind: 'unknown' });
  });

  it('decides failed at the first failed segment, with its code, and keeps it', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.finish(id, 'conn_a', ['F1', 'F2']);
    expect(await store.receipt({ connectorId: 'conn_a', smscIds: ['F2'], outcome: 'failed', errorCode: 'DLR_UNDELIV' }))
      .toEqual({ kind: 'applied', messageId: id, providerMessageId: 'F1', status: 'failed', errorCode: 'DLR_UNDELIV' });
    expect(await store.receipt({ connectorId: 'conn_a', smscIds: ['F1'], outcome: 'delivered', errorCode: null }))
      .toEqual({ kind: 'applied', messageId: id, providerMessageId: 'F1', status: 'failed', errorCode: 'DLR_UNDELIV' });
  });

  it('finds a segment by another spelling of its id', async () => {
    const id = message();
    await store.begin(id, 'conn_a', 1);
    await store.finish(id, 'conn_a', ['ff']);
    expect(await store.receipt({ connectorId: 'conn_a', smscIds: ['255', 'ff', 'FF'], outcome: 'delivered', errorCode: null }))
      .toEqual({ kind: 'applied', messageId: id, providerMessageId: 'ff', status: 'delivered' });
  });
});
