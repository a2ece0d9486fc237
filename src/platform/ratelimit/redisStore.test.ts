/**
 * A Redis that hangs (accepts the connection, never answers) or is down must not hold a request:
 * every counter command is bounded by REDIS_TIMEOUT_MS and fails as 503 SERVICE_UNAVAILABLE.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isServiceError } from '../errors.ts';
import { RedisCounterStore } from './redisStore.ts';

let silent: net.Server;
let silentPort: number;
const sockets = new Set<net.Socket>();
beforeAll(async () => {
  silent = net.createServer((s) => { sockets.add(s); s.on('error', () => {}); });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  silentPort = (silent.address() as net.AddressInfo).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => silent.close(r));
});

async function failsFast(store: RedisCounterStore): Promise<void> {
  const started = Date.now();
  const err = await store.tryIncrement('bucket', 0, 10, new Date(Date.now() + 60_000)).then(() => undefined, (e: unknown) => e);
  expect(Date.now() - started).toBeLessThan(3000);
  expect(isServiceError(err) && err.code).toBe('SERVICE_UNAVAILABLE');
  expect(isServiceError(err) && err.headers['Retry-After']).toBe('5');
  await store.close();
}

describe('Redis counter store timeouts', () => {
  it('a Redis that never answers fails the take with 503 SERVICE_UNAVAILABLE within the timeout', async () => {
    await failsFast(new RedisCounterStore(`redis://127.0.0.1:${silentPort}`, 'rl:test:', 300));
  });

  it('a Redis that is down fails the take the same way', async () => {
    const probe = net.createServer();
    const port = await new Promise<number>((r) => probe.listen(0, '127.0.0.1', () => r((probe.address() as net.AddressInfo).port)));
    await new Promise((r) => probe.close(r));
    await failsFast(new RedisCounterStore(`redis://127.0.0.1:${port}`, 'rl:test:', 300));
  });
});
