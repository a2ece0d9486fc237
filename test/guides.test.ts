/**
 * The guides' commands, run as written: one `node src/main.ts` on a fresh database (the key it
 * prints), then every `curl` command of every ```sh / ```bash block of each guide in docs/, in
 * order, through bash. Substituted: `http://localhost:4000` (and `$BASE`, `$API`) → the service,
 * `svc_test_sk_…` (and `$KEY`, `$TEST_KEY`, `$LIVE_KEY`, `$OWNER_KEY`) → the printed key,
 * `<prefix>_…` → the id of that prefix the guide's previous commands answered last (`msg_…` → the
 * message just sent), and the Twilio credentials. Each must answer 2xx, or the status a `# → NNN`
 * comment right after it (or at its end) documents; a GraphQL answer must carry no `errors`. A block
 * preceded by `<!-- not run: why -->` is skipped (it needs something a test cannot have). A guide
 * whose example breaks fails here.
 *
 * The guides' `/v1` requests go through Stoplight Prism's validation proxy (test/helpers/prism.ts):
 * what a guide shows must also be what the OpenAPI document promises, request and answer, so a
 * violation Prism reports fails the command (GraphQL, health and the Twilio-compatible surface are
 * outside the document and go to the service directly).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMainProcess, type MainProcess } from './helpers/mainProcess.ts';
import { startPrism, type PrismProxy } from './helpers/prism.ts';
import { accountSid } from '../src/twilio/sids.ts';

const run = promisify(execFile);
const hasCurl = await run('curl', ['--version']).then(() => true, () => false);
if (!hasCurl) process.stderr.write('test/guides.test.ts: no curl on this machine: the guides\' commands are not run\n');

const DOCS = path.resolve(import.meta.dirname, '../docs');
/** Generated references and measurement reports: no commands to run. */
const NOT_GUIDES = new Set(['benchmarks.md', 'faults.md', 'configuration.md', 'events.md', 'errors.md']);
const GUIDES = readdirSync(DOCS).filter((f) => f.endsWith('.md') && !NOT_GUIDES.has(f)).sort()
  // GUIDES_ONLY=voice.md,agents.md: only those (while writing them).
  .filter((f) => !process.env.GUIDES_ONLY || process.env.GUIDES_ONLY.split(',').includes(f));

type Command = { text: string; expect: number | null };

/** The shell blocks of a guide that are meant to run (not preceded by `<!-- not run … -->`). */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/(<!--\s*not run[^>]*-->\s*\n)?```(?:sh|bash)\n([\s\S]*?)```/g)].filter((m) => !m[1]).map((m) => m[2]!);
}

/**
 * A block's commands: lines joined while a quote is open or a line ends with `\`; comment lines
 * dropped, but `# → NNN` (on the command's last line or the line after it) sets its expected status.
 */
function commands(block: string): Command[] {
  const out: Command[] = [];
  let current = '';
  let quote: string | null = null;
  for (const line of block.split('\n')) {
    if (!current && !quote) {
      const trimmed = line.trim();
      if (!trimmed) continue;
      if (trimmed.startsWith('#')) {
        const status = /^#\s*→\s*(\d{3})\b/.exec(trimmed)?.[1];
        if (status && out.length > 0 && out[out.length - 1]!.expect === null) out[out.length - 1]!.expect = Number(status);
        continue;
      }
    }
    current += (current ? '\n' : '') + line;
    for (let i = 0; i < line.length; i++) {
      const ch = line[i]!;
      if (quote) {
        if (ch === quote) quote = null;
        else if (ch === '\\' && quote === '"') i++;
      } else if (ch === '\\') {
        i++;
      } else if (ch === '"' || ch === "'") {
        quote = ch;
      } else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1]!))) {
        break; // a comment to the end of the line
      }
    }
    if (quote || line.endsWith('\\')) continue;
    const status = /#\s*→\s*(\d{3})\b/.exec(current.split('\n').at(-1)!)?.[1];
    out.push({ text: current, expect: status ? Number(status) : null });
    current = '';
  }
  return out;
}

let main: MainProcess | undefined;
let prism: PrismProxy | undefined;
let base = '';
let key = '';
let organizationId = '';
let cwd = '';

beforeAll(async () => {
  if (!hasCurl) return;
  cwd = mkdtempSync(path.join(os.tmpdir(), 'docs-test-'));
  // Writing a guide: GUIDES_BASE_URL + GUIDES_KEY run the commands against a service already running.
  if (process.env.GUIDES_BASE_URL && process.env.GUIDES_KEY) {
    base = process.env.GUIDES_BASE_URL;
    key = process.env.GUIDES_KEY;
  } else {
    main = await startMainProcess();
    ({ base, key } = main);
  }
  prism = await startPrism(base, { errors: false });
  const org = await (await fetch(`${base}/v1/settings/organization`, { headers: { 'X-API-Key': key } })).json() as { data: { organization: { id: string } } };
  organizationId = org.data.organization.id;
}, 120_000);

afterAll(async () => {
  await prism?.stop();
  await main?.stop();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

/**
 * What Prism's `sl-violations` header holds against the document: every violation of the answer,
 * and of the request unless the guide shows a refused request on purpose (`# → 4xx`).
 */
function documentViolations(header: string, expected: number | null): string[] {
  if (!header) return [];
  const all = JSON.parse(header) as { location: string[]; message: string }[];
  const deliberate = expected !== null && expected >= 400 && expected < 500;
  return all.filter((v) => !(deliberate && v.location[0] === 'request')).map((v) => `${v.location.join('.')}: ${v.message}`);
}

/** Runs one guide's commands in order; returns how many ran. */
async function runGuide(file: string): Promise<number> {
  const ids = new Map<string, string>();
  const sid = accountSid(organizationId, 'test');
  const env = {
    PATH: process.env.PATH, HOME: cwd, BASE: base, API: base, KEY: key, TEST_KEY: key, LIVE_KEY: key, OWNER_KEY: key,
    TWILIO_ACCOUNT_SID: sid, TWILIO_AUTH_TOKEN: key,
  };
  let ran = 0;
  for (const block of shellBlocks(readFileSync(path.join(DOCS, file), 'utf8'))) {
    for (const command of commands(block)) {
      if (!/^curl\s/.test(command.text)) continue;
      const filled = command.text
        .replaceAll('http://localhost:4000', base).replaceAll('https://comms.example.com', base)
        .replaceAll('svc_test_sk_…', key)
        .replace(/\b([a-z]{2,6})_…/g, (whole, prefix: string) => ids.get(prefix) ?? whole)
        .replace(/(?:\$BASE|\$API|\$\{BASE\}|\$\{API\})\/v1\//g, `${base}/v1/`)
        .replaceAll(`${base}/v1/`, `${prism!.url}/v1/`)
        .replaceAll(`${prism!.url}/v1/openapi.json`, `${base}/v1/openapi.json`); // the document itself is not one of its paths
      // Prism's finding and the status on lines of their own after the body: `-w` adds them, `-sS` keeps errors visible.
      const script = filled.replace(/^curl\s/, 'curl -sS -w "\\n__VIOLATIONS__%header{sl-violations}\\n__STATUS__%{http_code}" ');
      const { stdout } = await run('bash', ['-c', script], { cwd, env, maxBuffer: 20 * 1024 * 1024 });
      const at = stdout.lastIndexOf('\n__VIOLATIONS__');
      const [header, statusText] = stdout.slice(at + '\n__VIOLATIONS__'.length).split('\n__STATUS__');
      const status = Number(statusText);
      const body = stdout.slice(0, at);
      const where = `${file}: ${command.text}\n→ ${status} ${body.slice(0, 600)}`;
      expect(documentViolations(header ?? "", command.expect), `${where}\nPrism: the OpenAPI document does not describe this`).toEqual([]);
      if (command.expect !== null) expect(status, where).toBe(command.expect);
      else expect(status >= 200 && status < 300, where).toBe(true);
      if (command.expect === null && /\/graphql\b/.test(filled)) expect(body, where).not.toMatch(/"errors"\s*:/);
      // Ids answered (`id`, `conversation_id`, …), the first of each prefix (the resource itself) winning over later ones.
      const found = [...body.matchAll(/"(?:[a-z]+_)*id"\s*:\s*"([a-z]{2,6})_([0-9a-z]{26})"/g)].reverse();
      for (const m of found) ids.set(m[1]!, `${m[1]}_${m[2]}`);
      ran++;
    }
  }
  return ran;
}

describe.skipIf(!hasCurl)('the guides\' commands (docs/*.md)', () => {
  it('finds guides with commands to run', () => {
    expect(GUIDES.length).toBeGreaterThanOrEqual(process.env.GUIDES_ONLY ? 1 : 14);
  });

  for (const file of GUIDES) {
    it(`${file}: every command answers as documented`, async () => {
      const ran = await runGuide(file);
      expect(ran, `${file} has no curl command to run`).toBeGreaterThan(0);
    }, 60_000);
  }
});

describe('reading a guide\'s commands', () => {
  it('joins continued lines and open quotes, and reads the documented status', () => {
    const block = [
      'curl -X POST http://localhost:4000/v1/x \\',
      '  -d \'{ "a": 1,',
      '        "b": "# not a comment" }\'',
      '# → 201 { "id": … }',
      'curl http://localhost:4000/v1/y   # → 404',
      'npm run -s admin -- org list',
    ].join('\n');
    const cmds = commands(block);
    expect(cmds.map((c) => c.expect)).toEqual([201, 404, null]);
    expect(cmds[0]!.text.split('\n')).toHaveLength(3);
    expect(shellBlocks('<!-- not run: needs a carrier -->\n```sh\ncurl a\n```\n```bash\ncurl b\n```\n')).toEqual(['curl b\n']);
  });
});
