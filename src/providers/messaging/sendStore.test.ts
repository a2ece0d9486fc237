import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { SandboxMessagingProvider } from './sandbox.ts';
import { MemorySendStore, PgSendStore, type SendClaim, type SendStore } from './sendStore.ts';
import type { ReportSink, StatusReport } from './types.ts';

function claim(key: string, providerMessageId: string, overrides: Partial<SendClaim> = {}): SendClaim {
  return { idempotencyKey: key, provider: 'sandbox', channel: 'sms', providerMessageId, recipients: ['+14155550123'], payload: { body: 'hi' }, ...overrides };
}

function behavesLikeASendStore(name: string, make: () => SendStore) {
  describe(name, () => {
    it('the first claim records and wins; later claims get the recorded provider id', async () => {
      const store = make();
      const key = `msg_${randomBytes(6).toString('hex')}`;
      expect(await store.claim(claim(key, `SBX${randomBytes(12).toString('hex')}`))).toEqual({ providerMessageId: expect.any(String), first: true });
      const firstId = (await store.claim(claim(key, 'SBXother'))).providerMessageId;
      expect(await store.claim(claim(key, 'SBXanother'))).toEqual({ providerMessageId: firstId, first: false });
      expect(firstId).not.toBe('SBXother');
    });

    it('keys are independent', async () => {
      const store = make();
      const a = await store.claim(claim(`msg_${randomBytes(6).toString('hex')}`, `SBX${randomBytes(12).toString('hex')}`));
      const b = await store.claim(claim(`msg_${randomBytes(6).toString('hex')}`, `SBX${randomBytes(12).toString('hex')}`));
      expect([a.first, b.first]).toEqual([true, true]);
      expect(a.providerMessageId).not.toBe(b.providerMessageId);
    });

    it('exactly one of many concurrent claims of a key is first, and all agree on the id', async () => {
      const store = make();
      const key = `msg_${randomBytes(6).toString('hex')}`;
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => store.claim(claim(key, `SBX${String(i).padStart(24, '0')}`))));
      expect(results.filter((r) => r.first)).toHaveLength(1);
      expect(new Set(results.map((r) => r.providerMessageId)).size).toBe(1);
    });
  });
}

behavesLikeASendStore('MemorySendStore', () => new MemorySendStore());

describe('PgSendStore', () => {
  const adminUrl = inject('pgAdminUrl');
  const dbName = `omni_t_${randomBytes(5).toString('hex')}_sendstore_${inject('pgTemplate').split('_').pop()}`;
  let pool: pg.Pool;

  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`create database "${dbName}"`);
    await admin.end();
    const u = new URL(adminUrl);
    u.pathname = `/${dbName}`;
    pool = new pg.Pool({ connectionString: u.toString(), max: 6 });
    // The table as the app's migration creates it.
    await pool.query(`create table sandbox_sends (idempotency_key text primary key, provider text not null, channel text not null,
      provider_message_id text not null unique, recipients jsonb not null, payload jsonb not null, created_at timestamptz not null default now())`);
  });

  afterAll(async () => {
    // pg-pool's end() resolves once it has asked its clients to end, not when they have: a forced
    // drop could still terminate one mid-goodbye, and that client's FATAL error (its pool's error
    // listener already gone) surfaced as an uncaught exception of the run (session 12). Wait until
    // the database has no sessions left, then drop it.
    await pool?.end();
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    for (let i = 0; i < 50; i++) {
      const { rows: [r] } = await admin.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = $1', [dbName]);
      if (r!.n === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await admin.query(`drop database if exists "${dbName}" with (force)`);
    await admin.end();
  });

  behavesLikeASendStore('over PostgreSQL', () => new PgSendStore(pool));

  it('stores the row as given', async () => {
    const store = new PgSendStore(pool);
    await store.claim(claim('msg_row', 'SBXrow', { channel: 'email', recipients: ['a@example.com', 'b@example.com'], payload: { subject: 'S', n: 1 } }));
    const { rows } = await pool.query('select * from sandbox_sends where idempotency_key = $1', ['msg_row']);
    expect(rows).toEqual([expect.objectContaining({
      idempotency_key: 'msg_row', provider: 'sandbox', channel: 'email', provider_message_id: 'SBXrow',
      recipients: ['a@example.com', 'b@example.com'], payload: { subject: 'S', n: 1 }, created_at: expect.any(Date),
    })]);
  });

  it('makes a sandbox send happen once across two provider instances (two workers)', async () => {
    const scheduled: Omit<StatusReport, 'at'>[] = [];
    const reports: ReportSink = { schedule: async (r) => { scheduled.push(r); } };
    const delays = { sendLatencyMs: 0, deliveredAfterMs: 10, readAfterMs: 10 };
    const workerA = new SandboxMessagingProvider({ channel: 'whatsapp', store: new PgSendStore(pool), reports, delays });
    const workerB = new SandboxMessagingProvider({ channel: 'whatsapp', store: new PgSendStore(pool), reports, delays });
    const msg = { id: 'msg_twice', channel: 'whatsapp' as const, from: '+15550001111', to: ['+14155550123'], body: 'hi', content: {} };
    const [a, b] = await Promise.all([workerA.send(msg), workerB.send(msg)]);
    expect(a).toEqual(b);
    const { rows } = await pool.query('select count(*)::int as n from sandbox_sends where idempotency_key = $1', ['msg_twice']);
    expect(rows[0].n).toBe(1);
    // Each worker schedules the one send's reports (a repeated report changes nothing downstream).
    expect(scheduled.map((r) => r.status).sort()).toEqual(['delivered', 'delivered', 'read', 'read']);
    expect(new Set(scheduled.map((r) => r.providerMessageId))).toEqual(new Set([a.providerMessageId]));
  });
});
