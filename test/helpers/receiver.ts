/** A local HTTP receiver (node:http on 127.0.0.1) that records every request: webhooks, status callbacks. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Hit = { path: string; headers: http.IncomingHttpHeaders; body: string; json: any };

export async function startReceiver(): Promise<{ url: string; hits: Hit[]; close(): void }> {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      let json: unknown;
      try { json = JSON.parse(body); } catch { json = undefined; }
      hits.push({ path: req.url ?? '', headers: req.headers, body, json });
      res.writeHead(200);
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits, close: () => server.close() };
}
