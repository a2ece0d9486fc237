/** Sending with the safe HTTP client to real local receivers: safePost, also over kept-alive connections (PinnedAgents). */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  PinnedAgents,
  postToVettedAddress,
  safePost,
  USER_AGENT,
  type HostLookup,
} from './safeHttp.ts';
import { failureOf, LOOPBACK, STRICT } from './safeHttp.testing.ts';



function fixedLookup(answers: Record<string, string[]>): HostLookup {
  return async (host) => {
    const found = answers[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

type Received = { method: string; url: string; headers: http.IncomingHttpHeaders; body: string };
type TestServer = { port: number; hits: Received[]; close: () => Promise<void> };

const servers: TestServer[] = [];

/** A real receiver on 127.0.0.1 (or ::1) that records every request it reads completely. */
async function startServer(respond: (req: http.IncomingMessage, res: http.ServerResponse) => void, host = '127.0.0.1'): Promise<TestServer> {
  const hits: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      respond(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  const s = { port: (server.address() as AddressInfo).port, hits, close };
  servers.push(s);
  return s;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const PAYLOAD = JSON.stringify({ id: 'evt_01', type: 'webhook.test', data: { ok: true } });

describe('safePost', () => {
  it('POSTs JSON with the service headers and returns status, headers, body and time', async () => {
    const server = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-receiver': 'yes' });
      res.end('thanks');
    });
    const response = await safePost(
      `http://127.0.0.1:${server.port}/hooks/in?x=1`,
      PAYLOAD,
      { 'X-Service-Signature': 'abc123', 'webhook-id': 'evt_01', Host: 'evil.example', 'Content-Type': 'text/plain' },
      { policy: LOOPBACK, timeoutMs: 5000 },
    );
    expect(response.status).toBe(200);
    expect(response.body).toBe('thanks');
    expect(response.headers['x-receiver']).toBe('yes');
    expect(response.timeMs).toBeGreaterThan(0);
    expect(response.timeMs).toBeLessThan(5000);

    expect(server.hits).toHaveLength(1);
    const hit = server.hits[0]!;
    expect(hit.method).toBe('POST');
    expect(hit.url).toBe('/hooks/in?x=1');
    expect(hit.body).toBe(PAYLOAD);
    expect(hit.headers['content-type']).toBe('application/json');
    expect(hit.headers['user-agent']).toBe(USER_AGENT);
    expect(hit.headers['x-service-signature']).toBe('abc123');
    expect(hit.headers['webhook-id']).toBe('evt_01');
    // The caller cannot replace Host: it is always the URL's host.
    expect(hit.headers.host).toBe(`127.0.0.1:${server.port}`);
    expect(hit.headers['content-length']).toBe(String(Buffer.byteLength(PAYLOAD)));
  });

  it('returns a 410 as a response', async () => {
    const server = await startServer((_req, res) => {
      res.writeHead(410);
      res.end('gone');
    });
    const response = await safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 });
    expect(response).toMatchObject({ status: 410, body: 'gone' });
  });

  it('does not follow a redirect: the 302 comes back and its target is never hit', async () => {
    const target = await startServer((_req, res) => {
      res.writeHead(200);
      res.end('followed');
    });
    const redirecting = await startServer((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/elsewhere` });
      res.end();
    });
    const response = await safePost(`http://127.0.0.1:${redirecting.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 });
    expect(response.status).toBe(302);
    expect(response.headers.location).toBe(`http://127.0.0.1:${target.port}/elsewhere`);
    await new Promise((r) => setTimeout(r, 50));
    expect(redirecting.hits).toHaveLength(1);
    expect(target.hits).toHaveLength(0);
  });

  it('times out when the server never answers', async () => {
    const server = await startServer(() => {
      /* never responds */
    });
    const started = performance.now();
    const error = await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 300 }));
    const elapsed = performance.now() - started;
    expect(error.kind).toBe('timeout');
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2000);
    expect(server.hits).toHaveLength(1);
  });

  it('times out when the body stalls after the headers (the deadline covers the whole response)', async () => {
    const server = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    });
    const error = await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 300 }));
    expect(error.kind).toBe('timeout');
  });

  it('times out when resolution hangs (the deadline covers DNS)', async () => {
    const lookup: HostLookup = () => new Promise(() => {});
    const error = await failureOf(() => safePost('https://slow-dns.example/', PAYLOAD, {}, { policy: STRICT, timeoutMs: 300, lookup }));
    expect(error.kind).toBe('timeout');
  });

  it('reports a refused connection (closed port)', async () => {
    const server = await startServer(() => {});
    const port = server.port;
    await servers.pop()!.close();
    const error = await failureOf(() => safePost(`http://127.0.0.1:${port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 }));
    expect(error.kind).toBe('connection');
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('reports a connection dropped before the response', async () => {
    const server = await startServer((req) => req.socket.destroy());
    const error = await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 }));
    expect(error.kind).toBe('connection');
  });

  it('truncates a large response body instead of failing', async () => {
    const big = 'x'.repeat(300 * 1024);
    const server = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(big);
    });
    const url = `http://127.0.0.1:${server.port}/`;
    const byDefault = await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 });
    expect(byDefault.status).toBe(200);
    expect(byDefault.body).toBe(big.slice(0, DEFAULT_MAX_RESPONSE_BYTES));
    const small = await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, maxResponseBytes: 1000 });
    expect(small.body).toHaveLength(1000);
  });

  it('keeps a body exactly at the limit whole', async () => {
    const server = await startServer((_req, res) => {
      res.writeHead(200);
      res.end('y'.repeat(1000));
    });
    const response = await safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, maxResponseBytes: 1000 });
    expect(response.body).toHaveLength(1000);
  });

  it('refuses blocked targets before sending anything', async () => {
    const server = await startServer((_req, res) => res.end('should not be reached'));
    const port = server.port;
    expect((await failureOf(() => safePost(`http://127.0.0.1:${port}/`, PAYLOAD, {}, { policy: STRICT, timeoutMs: 5000 }))).kind).toBe('invalid_url');
    expect((await failureOf(() => safePost(`https://2130706433:${port}/`, PAYLOAD, {}, { policy: STRICT, timeoutMs: 5000 }))).kind).toBe('blocked_address');
    expect((await failureOf(() => safePost(`https://[::ffff:127.0.0.1]:${port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 }))).kind).toBe('blocked_address');
    const lookup = fixedLookup({ 'rebind.example': ['127.0.0.1'] });
    expect((await failureOf(() => safePost(`https://rebind.example:${port}/`, PAYLOAD, {}, { policy: STRICT, timeoutMs: 5000, lookup }))).kind).toBe('blocked_address');
    expect((await failureOf(() => safePost('not a url', PAYLOAD, {}, { policy: STRICT, timeoutMs: 5000 }))).kind).toBe('invalid_url');
    expect(server.hits).toHaveLength(0);
  });

  it('resolves once and connects to the vetted address, even if the name would answer differently later', async () => {
    const server = await startServer((_req, res) => res.end('ok'));
    let calls = 0;
    // First answer vetted (loopback, allowed for localhost with the switch); any later answer would be elsewhere.
    const rebinding: HostLookup = async () => {
      calls += 1;
      return [{ address: calls === 1 ? '127.0.0.1' : '203.0.113.9', family: 4 }];
    };
    const response = await safePost(`http://localhost:${server.port}/pinned`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, lookup: rebinding });
    expect(response.status).toBe(200);
    expect(calls).toBe(1);
    expect(server.hits[0]?.headers.host).toBe(`localhost:${server.port}`);
  });

  it('sends to the pinned address with the original Host (hook.test → 127.0.0.1, no DNS)', async () => {
    const server = await startServer((_req, res) => res.end('pinned'));
    // hook.test does not resolve anywhere; the request can only arrive through the pinned address.
    const response = await postToVettedAddress(new URL(`http://hook.test:${server.port}/in`), { address: '127.0.0.1', family: 4 }, PAYLOAD, { 'x-a': '1' }, { timeoutMs: 5000 });
    expect(response).toMatchObject({ status: 200, body: 'pinned' });
    expect(server.hits).toHaveLength(1);
    expect(server.hits[0]?.headers.host).toBe(`hook.test:${server.port}`);
    expect(server.hits[0]?.url).toBe('/in');
  });

  it('reaches an IPv6 loopback receiver with a bracketed Host', async () => {
    const server = await startServer((_req, res) => res.end('v6'), '::1');
    const response = await safePost(`http://[::1]:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 });
    expect(response.body).toBe('v6');
    expect(server.hits[0]?.headers.host).toBe(`[::1]:${server.port}`);
  });

  it('stops when the caller aborts', async () => {
    const server = await startServer(() => {});
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    const error = await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, signal: controller.signal }));
    expect(error.kind).toBe('connection');
    expect((error.cause as Error).message).toBe('shutting down');
    const already = AbortSignal.abort();
    expect((await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, signal: already }))).kind).toBe('connection');
  });

  it('reports oversized response headers as too_large', async () => {
    const server = await startServer((_req, res) => {
      res.writeHead(200, { 'x-huge': 'h'.repeat(64 * 1024) });
      res.end();
    });
    const error = await failureOf(() => safePost(`http://127.0.0.1:${server.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 }));
    expect(error.kind).toBe('too_large');
  });
});

describe('safePost with kept-alive connections (PinnedAgents)', () => {
  const pools: PinnedAgents[] = [];
  const pool = (opts?: ConstructorParameters<typeof PinnedAgents>[0]) => {
    const p = new PinnedAgents(opts);
    pools.push(p);
    return p;
  };
  afterEach(() => {
    for (const p of pools.splice(0)) p.destroy();
  });

  /** A receiver that also records, per request, which local address and which connection it came in on. */
  async function startCountingServer(host = '127.0.0.1', port = 0, respond?: (req: http.IncomingMessage, res: http.ServerResponse, nth: number) => void) {
    const seen: { local: string; connection: number; nth: number }[] = [];
    const ids = new WeakMap<object, { id: number; requests: number }>();
    let connections = 0;
    const server = http.createServer((req, res) => {
      let c = ids.get(req.socket);
      if (!c) ids.set(req.socket, (c = { id: ++connections, requests: 0 }));
      c.requests += 1;
      const nth = c.requests;
      const connection = c.id;
      req.resume();
      req.on('end', () => {
        seen.push({ local: req.socket.localAddress ?? '', connection, nth });
        if (respond) respond(req, res, nth);
        else res.end('ok');
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
    const close = async (): Promise<void> => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    };
    servers.push({ port: (server.address() as AddressInfo).port, hits: [], close });
    return { port: (server.address() as AddressInfo).port, seen, connections: () => connections };
  }

  it('reuses one connection for consecutive requests to the same vetted address; without a pool each request connects anew', async () => {
    const server = await startCountingServer();
    const agents = pool();
    const url = `http://127.0.0.1:${server.port}/ka`;
    for (let i = 0; i < 3; i++) expect((await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents })).status).toBe(200);
    expect(server.seen.map((s) => s.connection)).toEqual([1, 1, 1]);
    expect(agents.socketCount).toBe(1);
    for (let i = 0; i < 2; i++) await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000 });
    expect(server.seen.map((s) => s.connection)).toEqual([1, 1, 1, 2, 3]);
    agents.destroy();
    expect(agents.socketCount).toBe(0);
  });

  it('stays pinned: a changed DNS answer gets a new connection to the newly vetted address, a blocked one is refused before any pooled socket is used', async () => {
    const first = await startCountingServer('127.0.0.1');
    // The same port on another loopback address: only the address DNS answers tells them apart.
    const second = await startCountingServer('127.0.0.2', first.port);
    const agents = pool();
    let answer = '127.0.0.1';
    const lookup: HostLookup = async () => [{ address: answer, family: 4 }];
    const url = `http://localhost:${first.port}/pinned`;
    const post = () => safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents, lookup });
    await post();
    await post();
    expect(first.seen.map((s) => [s.local, s.connection])).toEqual([['127.0.0.1', 1], ['127.0.0.1', 1]]);
    answer = '127.0.0.2';
    await post();
    expect(second.seen.map((s) => [s.local, s.connection])).toEqual([['127.0.0.2', 1]]);
    expect(first.seen).toHaveLength(2);
    // Rebinding to a private address while connections to the old addresses sit in the pool.
    answer = '10.0.0.7';
    expect((await failureOf(post)).kind).toBe('blocked_address');
    answer = '169.254.169.254';
    expect((await failureOf(post)).kind).toBe('blocked_address');
    expect(first.seen).toHaveLength(2);
    expect(second.seen).toHaveLength(1);
    // Back to the first address: its pooled connection is used again.
    answer = '127.0.0.1';
    await post();
    expect(first.seen.map((s) => s.connection)).toEqual([1, 1, 1]);
  });

  it('retries once on a fresh connection when the server closed a pooled connection', async () => {
    // Answers the first request of each connection; the second one on a connection is dropped
    // unanswered, as a server does when its keep-alive timeout fires just as a request arrives.
    const server = await startCountingServer('127.0.0.1', 0, (req, res, nth) => {
      if (nth === 1) res.end('ok');
      else req.socket.destroy();
    });
    const agents = pool();
    const url = `http://127.0.0.1:${server.port}/stale`;
    expect((await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents })).status).toBe(200);
    expect((await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents })).status).toBe(200);
    expect(server.seen.map((s) => [s.connection, s.nth])).toEqual([[1, 1], [1, 2], [2, 1]]);
  });

  it('does not follow redirects and keeps the deadline with a pool; an idle timeout shorter than a slow answer does not cut it', async () => {
    const target = await startCountingServer();
    const server = await startCountingServer('127.0.0.1', 0, (_req, res) => {
      setTimeout(() => {
        res.writeHead(302, { location: `http://127.0.0.1:${target.port}/` });
        res.end();
      }, 300);
    });
    const agents = pool({ idleSocketMs: 100 });
    const url = `http://127.0.0.1:${server.port}/slow`;
    expect((await safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents })).status).toBe(302);
    expect((await failureOf(() => safePost(url, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 150, agents }))).kind).toBe('timeout');
    expect(target.seen).toHaveLength(0);
    // Idle sockets close after idleSocketMs.
    await new Promise((r) => setTimeout(r, 600));
    expect(agents.socketCount).toBe(0);
  });

  it('keeps at most maxAgents agents (least recently used destroyed first)', async () => {
    const a = await startCountingServer();
    const b = await startCountingServer();
    const agents = pool({ maxAgents: 1 });
    await safePost(`http://127.0.0.1:${a.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents });
    await safePost(`http://127.0.0.1:${b.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents });
    await safePost(`http://127.0.0.1:${a.port}/`, PAYLOAD, {}, { policy: LOOPBACK, timeoutMs: 5000, agents });
    expect(a.seen.map((s) => s.connection)).toEqual([1, 2]);
    expect(agents.socketCount).toBe(1);
  });
});
