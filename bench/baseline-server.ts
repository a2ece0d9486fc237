/**
 * The benchmark's floor: a bare node:http server on the same database through a pg Pool, with
 *   GET  /lookup    ONE indexed SELECT (the API-key lookup by key_hash, as the service authenticates);
 *   POST /messages  ONE INSERT into `bench_messages` (a table this server creates at start) of the
 *                   JSON body's `to` and `body`, answering 201 with the new row's id;
 * and small JSON answers. No auth, no validation beyond "to and body are strings", no rate limits.
 * Env: DATABASE_URL, PORT, APP_SECRET (to hash X-API-Key the way the service does), POOL_MAX.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';
import { hashApiKey } from '../src/platform/auth/apiKeys.ts';

const databaseUrl = process.env.DATABASE_URL;
const secret = process.env.APP_SECRET;
if (!databaseUrl || !secret) throw new Error('baseline-server needs DATABASE_URL and APP_SECRET');
const port = Number(process.env.PORT ?? '0');
const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.POOL_MAX ?? '10') });
pool.on('error', () => { /* reported by the next query */ });

await pool.query(`create table if not exists bench_messages (
  id text primary key, to_number text not null, body text not null, created_at timestamptz not null)`);

function reply(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

const failed = (res: http.ServerResponse) => (e: unknown) => reply(res, 500, { error: e instanceof Error ? e.message : String(e) });

function insertMessage(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('error', failed(res));
  req.on('end', () => {
    let input: { to?: unknown; body?: unknown };
    try {
      input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { to?: unknown; body?: unknown };
    } catch {
      return reply(res, 400, { error: 'body is not JSON' });
    }
    if (typeof input.to !== 'string' || typeof input.body !== 'string') return reply(res, 400, { error: 'to and body must be strings' });
    const id = `bm_${randomBytes(12).toString('hex')}`;
    pool.query('insert into bench_messages (id, to_number, body, created_at) values ($1, $2, $3, now())', [id, input.to, input.body]).then(
      () => reply(res, 201, { data: { id, status: 'queued' } }),
      failed(res),
    );
  });
}

const server = http.createServer((req, res) => {
  if (req.url === '/healthz') return reply(res, 200, { status: 'ok' });
  if (req.method === 'POST' && req.url === '/messages') return insertMessage(req, res);
  const key = req.headers['x-api-key'];
  if (typeof key !== 'string') return reply(res, 401, { error: 'missing X-API-Key' });
  pool.query('select id, role, mode from api_keys where key_hash = $1', [hashApiKey(secret, key)]).then(
    ({ rows }) => (rows[0] ? reply(res, 200, { data: rows[0] }) : reply(res, 401, { error: 'unknown key' })),
    failed(res),
  );
});

server.listen(port, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof addr === 'object' && addr ? addr.port : port })}\n`);
});

const stop = () => {
  server.close();
  server.closeAllConnections();
  void pool.end().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
