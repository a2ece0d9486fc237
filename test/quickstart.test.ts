/**
 * The README's Quick start, run as written: `node src/main.ts` on a fresh database prints a test
 * key; every `curl` line of the Quick start's second block runs (curl, with the key, the port and the
 * id of the message the previous command created substituted) and must answer 2xx; `open` lines are
 * fetched; the first SMS reaches `delivered`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMainProcess, type MainProcess } from './helpers/mainProcess.ts';

const run = promisify(execFile);
// The commands are curl commands: without curl on the machine there is nothing to run as written.
const hasCurl = await run('curl', ['--version']).then(() => true, () => false);
if (!hasCurl) process.stderr.write('test/quickstart.test.ts: no curl on this machine: the Quick start commands are not run\n');
const README = readFileSync(path.resolve(import.meta.dirname, '../README.md'), 'utf8');

/** The shell blocks of the README's Quick start section. */
function quickStartBlocks(): string[] {
  const section = README.slice(README.indexOf('## Quick start'), README.indexOf('\n## ', README.indexOf('## Quick start') + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** A command line's words as a shell would split them (single and double quotes; `#` comments dropped). */
function words(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  let started = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) quote = null; else cur += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch; started = true;
    } else if (ch === '#' && !started) {
      break;
    } else if (/\s/.test(ch)) {
      if (started) { out.push(cur); cur = ''; started = false; }
      if (line.slice(i + 1).trimStart().startsWith('#')) break;
    } else {
      cur += ch; started = true;
    }
  }
  if (started) out.push(cur);
  return out;
}

let main: MainProcess | undefined;
let base = '';
let key = '';

beforeAll(async () => {
  if (!hasCurl) return;
  main = await startMainProcess();
  ({ base, key } = main);
}, 120_000);

afterAll(async () => {
  await main?.stop();
});

describe.skipIf(!hasCurl)('README Quick start', () => {
  it('every command answers 2xx as written, and the first SMS reaches delivered', async () => {
    const blocks = quickStartBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const lines = blocks[1]!.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(lines.filter((l) => l.startsWith('curl')).length).toBeGreaterThanOrEqual(4);
    let lastMessage = '';
    let smsSeen = false;
    for (const line of lines) {
      const filled = line.replaceAll('http://localhost:4000', base).replaceAll('svc_test_sk_…', key).replaceAll('msg_…', lastMessage);
      const argv = words(filled);
      const [cmd, ...args] = argv;
      if (cmd === 'open') {
        const r = await fetch(args[0]!, { headers: { Accept: 'text/html' } });
        expect(r.status, line).toBe(200);
        continue;
      }
      expect(cmd, line).toBe('curl');
      // --fail: a non-2xx answer fails the command (and the test).
      const { stdout } = await run('curl', ['--silent', '--show-error', '--fail', ...args], { maxBuffer: 20 * 1024 * 1024 });
      const id = /"id":"(msg_[0-9a-z]+)"/.exec(stdout)?.[1];
      if (line.includes('/v1/messages/sms')) {
        expect(id, stdout).toBeDefined();
        lastMessage = id!;
        smsSeen = true;
      }
    }
    expect(smsSeen).toBe(true);
    // The first SMS goes queued → sent → delivered in the sandbox.
    const deadline = Date.now() + 20_000;
    let status = '';
    while (Date.now() < deadline && status !== 'delivered') {
      status = (await (await fetch(`${base}/v1/messages/${lastMessage}`, { headers: { 'X-API-Key': key } })).json()).data.status;
      if (status !== 'delivered') await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe('delivered');
  }, 90_000);
});
