import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isServiceError } from './platform/errors.ts';
import { readBody } from './server.ts';

describe('readBody', () => {
  let server: http.Server;
  let port: number;
  let outcome: Promise<{ body?: string; error?: unknown }>;
  let settle: (v: { body?: string; error?: unknown }) => void;
  const expectOutcome = () => (outcome = new Promise((r) => { settle = r; }));

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      readBody(req, 64).then((body) => { settle({ body }); res.end('ok'); }, (error: unknown) => { settle({ error }); res.end('no'); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const raw = (text: string, thenDestroy = false) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(text);
      if (thenDestroy) setTimeout(() => socket.destroy(), 50);
    });
    socket.on('error', () => {});
    socket.on('data', () => socket.end());
  };

  it('reads a body sent in several chunks', async () => {
    expectOutcome();
    raw('POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndéf\r\n0\r\n\r\n');
    expect(await outcome).toEqual({ body: 'abcdéf' });
  });

  it('refuses a body over the limit, declared or streamed', async () => {
    expectOutcome();
    raw('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 65\r\n\r\n');
    const declared = await outcome;
    expect(isServiceError(declared.error) && declared.error.code).toBe('VALIDATION_ERROR');
    expectOutcome();
    raw(`POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n28\r\n${'x'.repeat(40)}\r\n28\r\n${'y'.repeat(40)}\r\n0\r\n\r\n`);
    const streamed = await outcome;
    expect(isServiceError(streamed.error) && streamed.error.headers).toEqual({ Connection: 'close' });
  });

  it('settles (rejects) when the client goes away before the end of the body', async () => {
    expectOutcome();
    raw('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nonly part', true);
    const r = await Promise.race([outcome, new Promise((res) => setTimeout(() => res('hung'), 3000))]);
    expect(r).not.toBe('hung');
    expect((r as { error?: unknown }).error).toBeInstanceOf(Error);
  });
});
