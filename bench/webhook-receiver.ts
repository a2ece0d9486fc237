/**
 * The bench's webhook receiver: a bare node:http server on 127.0.0.1 that answers every delivery
 * `200 ok` as soon as its body is in, and records per delivery the arrival time (wall clock to the
 * microsecond: performance.timeOrigin + performance.now(), the same host clock the bench stamps
 * events with), the event id, its `data.bench_t` (the event's created_at to the microsecond) and
 * `data.bench_phase`. Runs in its own process, so it takes no CPU from the service's.
 *   POST /__secret   {"secret": "whsec_…"}: from now on check X-Service-Signature (hex HMAC-SHA256
 *                    of the raw body) on every delivery and count the bad ones;
 *   GET  /__count    {"count": n, "byPhase": {…}};
 *   GET  /__stats    every recorded delivery as [eventId, phase, benchT, arrival, duplicate],
 *                    plus counts of bad signatures and unparsable bodies;
 *   anything else    a delivery.
 * Prints `{"listening": port}` once it listens. Env: PORT (default 0: any free port).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';

type Hit = [eventId: string, phase: string, benchT: number, arrival: number, duplicate: 0 | 1];

const hits: Hit[] = [];
const byPhase: Record<string, number> = {};
const seen = new Set<string>();
let secret: string | undefined;
let badSignatures = 0;
let unsigned = 0;
let unparsable = 0;

const now = () => performance.timeOrigin + performance.now();

function reply(res: http.ServerResponse, status: number, body: string, type = 'text/plain'): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function signatureOk(raw: Buffer, header: string | string[] | undefined): boolean | undefined {
  if (secret === undefined) return undefined;
  if (typeof header !== 'string') return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(raw).digest('hex'));
  const given = Buffer.from(header);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const arrival = now();
    const url = req.url ?? '/';
    if (req.method === 'GET' && url === '/__count') {
      return reply(res, 200, JSON.stringify({ count: hits.length, byPhase }), 'application/json');
    }
    if (req.method === 'GET' && url === '/__stats') {
      return reply(res, 200, JSON.stringify({ hits, badSignatures, unsigned, unparsable }), 'application/json');
    }
    const raw = Buffer.concat(chunks);
    if (req.method === 'POST' && url === '/__secret') {
      secret = (JSON.parse(raw.toString('utf8')) as { secret: string }).secret;
      return reply(res, 204, '');
    }
    // A delivery: answer first, then book-keep.
    reply(res, 200, 'ok');
    const sig = signatureOk(raw, req.headers['x-service-signature']);
    if (sig === false) {
      if (req.headers['x-service-signature'] === undefined) unsigned++;
      else badSignatures++;
    }
    try {
      const body = JSON.parse(raw.toString('utf8')) as { id: string; data?: { bench_t?: number; bench_phase?: string } };
      const phase = body.data?.bench_phase ?? 'other';
      const duplicate = seen.has(body.id) ? 1 : 0;
      seen.add(body.id);
      hits.push([body.id, phase, body.data?.bench_t ?? NaN, arrival, duplicate]);
      byPhase[phase] = (byPhase[phase] ?? 0) + 1;
    } catch {
      unparsable++;
    }
  });
});

server.listen(Number(process.env.PORT ?? '0'), '127.0.0.1', 1024, () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ listening: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});

const stop = () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
