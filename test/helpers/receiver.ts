/** A local HTTP receiver (node:http on 127.0.0.1) that records every request: webhooks, status callbacks. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Hit = { path: string; headers: http.IncomingHttpHeaders; body: string; json: any };
/** The answer to a hit (default 200 `ok`). */
export type Reply = { status: number; body?: string; headers?: Record<string, string> };

export async function startReceiver(opts: { reply?: (hit: Hit) => Reply | undefined } = {}): Promise<{ url: string; hits: Hit[]; close(): void }> {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let json: unknown;
      try { json = JSON.parse(body); } catch { json = undefined; }
      const hit = { path: req.url ?? '', headers: req.headers, body, json };
      hits.push(hit);
      const reply = opts.reply?.(hit) ?? { status: 200, body: 'ok' };
      res.writeHead(reply.status, reply.headers ?? {});
      res.end(reply.body ?? '');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits, close: () => server.close() };
}
