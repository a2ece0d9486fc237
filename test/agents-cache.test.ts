/**
 * Each instance keeps the agents its chat turns read (src/modules/agents/agents.cache.ts) and drops
 * one when any instance, or anything else, changes it: two app instances over one database, a
 * change on the first is in force on the second as soon as the commit's NOTIFY reaches it ("PUT …
 * effective for new conversations at once", as far as NOTIFY delivery allows: agents.cache.ts), and
 * a change made in SQL reaches both through the trigger's NOTIFY.
 *
 * The tests wait for the other instance to drop the agent before chatting there: PostgreSQL sends
 * the notification from the listening backend once the OS runs it, which on a loaded 2-core CI
 * machine came after this process's next HTTP round trip to the other instance (a chat answered
 * 200 right after the pause on the first instance).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { BASE, expectError, until } from './helpers/agents.ts';

let a: TestApp;
let b: TestApp;
let org: TestOrg;

beforeAll(async () => {
  a = await startTestApp({ env: { SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0' } });
  b = await startTestApp({ sameDatabaseAs: a, env: { SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0' } });
  org = await a.createOrg('enterprise', 'Cache org');
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const on = (t: TestApp, method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, body });
const chat = (t: TestApp, id: string, message = 'What are your hours?') => on(t, 'POST', `/v1/agents/${id}/chat`, { message });

async function deployed(extra: Record<string, unknown> = {}): Promise<string> {
  const created = await on(a, 'POST', '/v1/agents', { ...BASE, channels: ['web'], ...extra });
  expect(created.status, created.text).toBe(201);
  const id = created.body.data.id as string;
  expect((await on(a, 'POST', `/v1/agents/${id}/deploy`, {})).status).toBe(200);
  return id;
}

/** Until instance `t` has dropped agent `id` on hearing another instance's change (it is never asked meanwhile). */
async function heard(t: TestApp, id: string): Promise<void> {
  await until(async () => (t.app.services.agents.cached(id) ? undefined : true), 3000);
}

/** Chats on both instances until each has the agent in its cache (a first read may come before its LISTEN is up). */
async function warm(id: string): Promise<void> {
  for (const t of [a, b]) {
    await until(async () => {
      expect((await chat(t, id)).status).toBe(200);
      return t.app.services.agents.cached(id) ? true : undefined;
    });
  }
}

describe('agents cached per instance', () => {
  it('a PUT on one instance is in force for the next chat on the other', async () => {
    const id = await deployed();
    await warm(id);
    const before = await chat(b, id);
    expect(before.status).toBe(200);
    const r = await on(a, 'PUT', `/v1/agents/${id}`, { ...BASE, system_prompt: `${'Answer in the voice of a ship captain, every time. '.repeat(40)}`, max_tokens: 3 });
    expect(r.status, r.text).toBe(200);
    expect(a.app.services.agents.cached(id)).toBe(false); // the instance that changed it, before it answered
    await heard(b, id);
    const after = await chat(b, id);
    expect(after.status, after.text).toBe(200);
    // The longer system prompt is in the prompt, the 3-token cap on the answer.
    expect(after.body.data.tokens_used.input).toBeGreaterThan(before.body.data.tokens_used.input + 300);
    expect(after.body.data.tokens_used.output).toBeLessThanOrEqual(3);
    const same = await chat(a, id);
    expect(same.body.data.tokens_used.output).toBeLessThanOrEqual(3);
  });

  it('pause and delete on one instance stop chats on the other as soon as it hears the NOTIFY', async () => {
    const id = await deployed();
    await warm(id);
    expect((await on(a, 'POST', `/v1/agents/${id}/pause`)).status).toBe(200);
    await heard(b, id);
    expectError(await chat(b, id), 422, 'AGENT_NOT_DEPLOYED');
    expectError(await chat(a, id), 422, 'AGENT_NOT_DEPLOYED');
    expect((await on(b, 'POST', `/v1/agents/${id}/resume`)).status).toBe(200);
    await heard(a, id);
    expect((await chat(a, id)).status).toBe(200);
    expect((await on(b, 'DELETE', `/v1/agents/${id}`)).status).toBe(204);
    await heard(a, id);
    expectError(await chat(a, id), 404, 'NOT_FOUND');
  });

  it('serves turns from the cache, and a change made in SQL reaches every instance through the trigger', async () => {
    const id = await deployed();
    await warm(id);
    // Without the trigger (replica role: no triggers fire) a change goes unheard: the cache answers.
    const quiet = new pg.Client({ connectionString: a.ownerUrl }); // the owner: the service's role may not set it
    await quiet.connect();
    try {
      await quiet.query(`set session_replication_role = replica`);
      await quiet.query(`update agents set status = 'paused' where id = $1`, [id]);
    } finally {
      await quiet.end();
    }
    expect((await chat(a, id)).status).toBe(200);
    expect((await chat(b, id)).status).toBe(200);
    // An ordinary statement NOTIFYs at commit: both instances drop the agent.
    await a.db.query(`update agents set max_tokens = 2 where id = $1`, [id]);
    for (const t of [a, b]) {
      await until(async () => ((await chat(t, id)).status === 422 ? true : undefined));
      expectError(await chat(t, id), 422, 'AGENT_NOT_DEPLOYED');
    }
  });
});
