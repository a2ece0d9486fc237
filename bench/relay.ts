/** `node bench/relay.ts` (N=100000, PER=1000): the relay's cost per event (no consumers): insert N events in statements of PER, then drain; PostgreSQL backend CPU of each phase. */
import { createOrm, runMigrations } from '../src/platform/db/orm.ts';
import { ENTITIES } from '../src/modules/index.ts';
import { EventRelay } from '../src/platform/events/relay.ts';
import { createLogger } from '../src/platform/logger.ts';
import pg from 'pg';
import { backendCpu, createCleanup, createLog, freshLocalDatabase, runMain } from './support.ts';

const log = createLog('relay');
const { onCleanup, cleanup } = createCleanup(log);
const N = Number(process.env.N ?? 100000);
const PER = Number(process.env.PER ?? 1000);
async function main(): Promise<void> {
  const url = await freshLocalDatabase(`omni_bench_relay_${process.pid}`, onCleanup);
  const orm = await createOrm(url, { entities: ENTITIES, poolMax: 4 });
  onCleanup('orm', () => orm.close());
  await runMigrations(orm);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  onCleanup('client', () => db.end());
  await db.query(`insert into organizations (id, name, plan, created_at, updated_at) select 'org_relaycost', 'r', 'enterprise', now(), now() where not exists (select 1 from organizations where id = 'org_relaycost')`).catch((e) => log(`org insert: ${e.message}`));
  const dbName = new URL(url).pathname.slice(1);
  const cpu = () => [...backendCpu(dbName).values()].reduce((a, b) => a + b, 0);
  let c0 = cpu();
  let t0 = performance.now();
  for (let i = 0; i < N; i += PER) {
    await db.query(`insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
      select 'evt_' || lpad(($1::int + g)::text, 20, '0'), 'org_relaycost', 'test', 'message.sent', 'message', 'msg_' || g, 1,
             jsonb_build_object('message_id', 'msg_' || g, 'channel', 'sms', 'from', '+15005550006', 'to', '+14155550100', 'status', 'sent', 'direction', 'outbound'), now()
        from generate_series(1, $2::int) g`, [i, PER]);
  }
  const insertMs = performance.now() - t0;
  const insertCpu = cpu() - c0;
  const relay = new EventRelay({ orm, url, log: createLogger('silent') });
  c0 = cpu();
  t0 = performance.now();
  let total = 0;
  for (let n = await relay.drainOnce(); n > 0; n = await relay.drainOnce()) total += n;
  const drainMs = performance.now() - t0;
  const drainCpu = cpu() - c0;
  log(`insert ${N}: ${insertMs.toFixed(0)} ms, PG CPU ${(insertCpu * 1e6 / N).toFixed(1)} µs/event; drain ${total}: ${drainMs.toFixed(0)} ms, PG CPU ${(drainCpu * 1e6 / total).toFixed(1)} µs/event`);
}
await runMain(main, log, cleanup);
