/**
 * The benchmark's floor: a bare node:http server that, per request, runs ONE indexed SELECT on the
 * same database through a pg Pool (the API key lookup by key_hash) and returns small JSON.
 * Env: DATABASE_URL, PORT, APP_SECRET (to hash X-API-Key the way the service does), POOL_MAX.
 */
import http from 'node:http';
import pg from 'pg';
import { hashApiKey } from '../src/platform/auth/apiKeys.ts';

const databaseUrl = process.env.DATABASE_URL;
const secret = process.env.APP_SECRET;
if (!databaseUrl || !secret) throw new Error('baseline-server needs DATABASE_URL and APP_SECRET');
const port = Number(process.env.PORT ?? '0');
const pool = new pg.Pool({ connectionString: databaseUrl, max: Number(process.env.POOL_MAX ?? '10') });
pool.on('error', () => { /* reported by the next query */ });

function reply(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

const server = http.createServer((req, res) => {
  if (req.url === '/healthz') return reply(res, 200, { status: 'ok' });
  const key = req.headers['x-api-key'];
  if (typeof key !== 'string') return reply(res, 401, { error: 'missing X-API-Key' });
  pool.query('select id, role, mode from api_keys where key_hash = $1', [hashApiKey(secret, key)]).then(
    ({ rows }) => (rows[0] ? reply(res, 200, { data: rows[0] }) : reply(res, 401, { error: 'unknown key' })),
    (e: unknown) => reply(res, 500, { error: e instanceof Error ? e.message : String(e) }),
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
