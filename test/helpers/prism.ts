/**
 * Stoplight Prism's validation proxy (`prism proxy schema/openapi.json <service> --errors`) in front
 * of a running service: every request and answer through it is checked against the OpenAPI
 * document. Prism names what is wrong in the `sl-violations` header, and with `--errors` answers in
 * the service's place with its own problem (`type: https://stoplight.io/prism/errors#…`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

export type PrismProxy = { url: string; log: () => string; stop: () => Promise<void> };

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Starts Prism proxying to `target` (the service's base URL); resolves once it listens. `errors`
 * (default): a request the document refuses is answered by Prism, not passed on; without it every
 * request reaches the service and the violations ride along in `sl-violations`.
 */
export async function startPrism(target: string, options: { errors?: boolean } = {}): Promise<PrismProxy> {
  const port = await freePort();
  // Prism's own script, run by this Node (its `#!/usr/bin/env node` may find an older one).
  const prism: ChildProcess = spawn(process.execPath, [
    path.join(ROOT, 'node_modules/@stoplight/prism-cli/dist/index.js'),
    'proxy', path.join(ROOT, 'schema/openapi.json'), target, ...(options.errors === false ? [] : ['--errors']), '-p', String(port), '-h', '127.0.0.1',
  ], { cwd: ROOT, env: { ...process.env, NODE_OPTIONS: '' } });
  let log = '';
  prism.stdout!.on('data', (d) => { log += String(d); });
  prism.stderr!.on('data', (d) => { log += String(d); });
  const deadline = Date.now() + 60_000;
  while (!/Prism is listening/.test(log)) {
    if (Date.now() > deadline || prism.exitCode !== null) {
      prism.kill('SIGKILL');
      throw new Error(`prism did not start:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    log: () => log,
    stop: async () => {
      if (prism.exitCode !== null) return;
      const exited = new Promise((r) => prism.on('exit', r));
      prism.kill('SIGTERM');
      await exited;
    },
  };
}

/** What Prism found wrong: the `sl-violations` header, or (with `--errors`) its own problem answer in the service's place. */
export function violationsOf(header: string | null, body: any): string | null {
  if (header) return header;
  if (typeof body?.type === 'string' && body.type.startsWith('https://stoplight.io/prism/errors')) return JSON.stringify(body.validation ?? body);
  return null;
}
