/**
 * Issue 16's crash promise, quick form (the bench's 20,000-recipient run, `node bench/campaigns.ts`,
 * is the long one): a campaign's workers process is killed with SIGKILL at random moments, each
 * after it made progress, while it accepts recipients in batches and delivers their messages, and
 * is restarted every time. At the end every recipient was sent exactly once, counted at the
 * sandbox provider (`sandbox_sends`, one row per provider send), and no address got two messages.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { startTestApp, TEST_APP_SECRET, type TestApp, type TestOrg, CHILD_NODE_ENV } from '../helpers/testApp.ts';

const RECIPIENTS = 2000;
const KILLS = 3;

let t: TestApp;
let org: TestOrg;
let workers: { proc: ChildProcess; exited: Promise<unknown>; out: string } | undefined;

function startWorkers(): NonNullable<typeof workers> {
  const proc = spawn(process.execPath, [path.resolve(import.meta.dirname, '../../src/main.ts'), '--workers-only'], {
    env: {
      ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: t.databaseUrl, APP_SECRET: TEST_APP_SECRET, LOG_LEVEL: 'warn', DB_POOL_SIZE: '6', BOOTSTRAP_ORG: 'false',
      SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0', SANDBOX_READ_AFTER_MS: '0',
      // Unpaced, small batches (more of them to be caught mid-way), held batches back after 5 s.
      CAMPAIGN_SANDBOX_THROUGHPUT: '0', CAMPAIGN_BATCH_SIZE: '25', CAMPAIGN_BATCH_TIMEOUT_SECONDS: '5',
    },
  });
  const w = { proc, exited: new Promise((resolve) => proc.on('exit', resolve)), out: '' };
  const keep = (d: Buffer) => { w.out = (w.out + String(d)).slice(-4000); };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  return w;
}

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock });
  org = await t.createOrg('enterprise', 'Campaign crash');
});
afterAll(async () => {
  workers?.proc.kill('SIGKILL');
  await workers?.exited;
  await t?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a campaign whose workers process is killed with SIGKILL again and again', () => {
  it('sends every recipient exactly once at the provider', async () => {
    const list = await t.rest('POST', '/v1/contacts/lists', { key: org.testKey, body: { name: 'Crash' } });
    expect(list.status, list.text).toBe(201);
    await t.db.query(`insert into contacts (id, organization_id, mode, phone, email, first_name, last_name, country, lifecycle_stage, tags, metadata, consent, sequence, created_at, updated_at)
      select 'con_crash' || lpad(g::text, 10, '0'), $1, 'test', '+1415' || (3000000 + g)::text, null, 'P' || g, null, 'US', null, '[]', '{}', '{}', 1, now(), now()
        from generate_series(1, $2) g`, [org.orgId, RECIPIENTS]);
    await t.db.query(`insert into contact_list_members (list_id, contact_id, organization_id, mode, added_at)
      select $1, 'con_crash' || lpad(g::text, 10, '0'), $2, 'test', now() from generate_series(1, $3) g`, [list.body.data.id, org.orgId, RECIPIENTS]);
    const created = await t.rest('POST', '/v1/campaigns', { key: org.testKey, body: { name: 'Crash', channel: 'sms', list_id: list.body.data.id, body: 'Hi {{contact.first_name}}. Reply STOP to opt out' } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id as string;

    const queued = async () => (await t.db.query(`select count(*)::int as n from messages where metadata->>'campaign_id' = $1 and status = 'queued'`, [id])).rows[0].n as number;
    const progress = async () => (await t.db.query(`select count(*)::int as n from sandbox_sends ss join messages m on m.id = ss.idempotency_key where m.metadata->>'campaign_id' = $1`, [id])).rows[0].n as number;
    const finished = async () => (await t.db.query('select status from campaigns where id = $1', [id])).rows[0].status === 'completed' && (await queued()) === 0;

    workers = startWorkers();
    expect((await t.rest('POST', `/v1/campaigns/${id}/send`, { key: org.testKey })).status).toBe(200);
    const deadline = Date.now() + 150_000;
    let kills = 0;
    let seen = 0;
    while (kills < KILLS && !(await finished())) {
      // Kill a process only once it has sent something since it started, at a random moment soon after.
      while ((await progress()) === seen && Date.now() < deadline) await sleep(50);
      await sleep(Math.random() * 200);
      if (await finished()) break;
      workers.proc.kill('SIGKILL');
      await workers.exited;
      kills++;
      seen = await progress();
      workers = startWorkers();
    }
    while (!(await finished())) {
      if (Date.now() > deadline) throw new Error(`the campaign did not finish; the workers said: ${workers.out}`);
      await sleep(200);
    }
    expect(kills, `killed ${kills} times`).toBeGreaterThan(0);

    const recipients = (await t.db.query(`select count(*) filter (where status = 'sent')::int as sent, count(*)::int as total from campaign_recipients where campaign_id = $1`, [id])).rows[0];
    expect(recipients).toEqual({ sent: RECIPIENTS, total: RECIPIENTS });
    // Provider sends per recipient: exactly one each.
    const perRecipient = (await t.db.query(`select n, count(*)::int as recipients from (
        select r.seq, count(ss.idempotency_key)::int as n from campaign_recipients r
          left join messages m on m.id = r.message_id
          left join sandbox_sends ss on ss.idempotency_key = m.id
         where r.campaign_id = $1 group by r.seq) s group by n`, [id])).rows;
    expect(perRecipient).toEqual([{ n: 1, recipients: RECIPIENTS }]);
    const messagesPerAddress = (await t.db.query(`select count(*)::int as n from (select "to" from messages where metadata->>'campaign_id' = $1 group by "to" having count(*) > 1) d`, [id])).rows[0].n;
    expect(messagesPerAddress).toBe(0);
    expect((await t.db.query(`select count(*)::int as n from messages where metadata->>'campaign_id' = $1`, [id])).rows[0].n).toBe(RECIPIENTS);
  }, 180_000);
});
