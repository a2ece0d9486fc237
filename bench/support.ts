/** What every bench script needs: a log, a cleanup stack run once (also on signals), free ports. */
import net from 'node:net';

export function createLog(prefix: string): (msg: string) => void {
  return (msg) => process.stderr.write(`[${prefix}] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A LIFO stack of cleanups run once, on success, error or SIGINT/SIGTERM. */
export function createCleanup(log: (msg: string) => void): { onCleanup: (name: string, fn: () => Promise<void>) => void; cleanup: () => Promise<void> } {
  const cleanups: { name: string; fn: () => Promise<void> }[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = (): Promise<void> => {
    cleaning ??= (async () => {
      for (const c of cleanups.splice(0).reverse()) {
        try {
          log(`cleanup: ${c.name}`);
          await c.fn();
        } catch (e) {
          log(`cleanup of ${c.name} failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    })();
    return cleaning;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  return { onCleanup: (name, fn) => { cleanups.push({ name, fn }); }, cleanup };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.setTimeout(1000, () => { s.destroy(); resolve(false); });
  });
}
