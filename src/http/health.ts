/** `/healthz` (the process answers) and `/readyz` (database and job queue reachable, not draining). */
import type http from 'node:http';
import type { Pool } from 'pg';
import type { Jobs } from '../platform/jobs/jobs.ts';
import { send } from './frontDoor.ts';

export function healthz(res: http.ServerResponse): void {
  send(res, { status: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ status: 'ok' }) });
}

export async function readyz(res: http.ServerResponse, deps: { pool: Pool; jobs: Pick<Jobs, 'ready'>; draining: boolean }): Promise<void> {
  let database = false;
  try {
    await deps.pool.query('select 1');
    database = true;
  } catch { /* reported below */ }
  const queue = await deps.jobs.ready();
  const ok = database && queue && !deps.draining;
  send(res, { status: ok ? 200 : 503, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ status: ok ? 'ready' : 'unavailable', database, queue, draining: deps.draining }) });
}
