/**
 * Both pools of an instance (the app's pg pool and the ORM's) keep POOL_MIN_IDLE connections open
 * however long they sit unused: only connections above that close after the idle timeout, so a
 * quiet instance's occasional concurrent statement does not open a connection on a request's path.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENTITIES } from '../src/modules/index.ts';
import { createOrm, createPool, POOL_MIN_IDLE } from '../src/platform/db/orm.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp({ workers: false }); });
afterAll(async () => { await t?.close(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Opens four connections at once, lets them sit idle past the timeout; answers how many are left. */
async function leftAfterIdle(pool: pg.Pool): Promise<number> {
  await Promise.all(Array.from({ length: 4 }, () => pool.query('select pg_sleep(0.05)')));
  expect(pool.totalCount).toBeGreaterThan(POOL_MIN_IDLE);
  await sleep(400);
  return pool.totalCount;
}

describe('pools keep their minimum of idle connections', () => {
  it('the app pool closes only the connections above POOL_MIN_IDLE', async () => {
    expect(POOL_MIN_IDLE).toBeGreaterThan(0);
    const pool = createPool(t.databaseUrl, 4, { idleTimeoutMs: 50 });
    try {
      expect(await leftAfterIdle(pool)).toBe(POOL_MIN_IDLE);
    } finally {
      await pool.end();
    }
  });

  it('so does the ORM pool', async () => {
    const orm = await createOrm(t.databaseUrl, { entities: ENTITIES, poolMax: 4, timeouts: { idleTimeoutMs: 50 } });
    try {
      const pool = await orm.em.getConnection().getNativeClient() as unknown as pg.Pool;
      expect(await leftAfterIdle(pool)).toBe(POOL_MIN_IDLE);
    } finally {
      await orm.close();
    }
  });
});
