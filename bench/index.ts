/**
 * `npm run bench [-- <scenario> …]`: runs the bench scenarios one after another (all of them when
 * none is named), each its own `node bench/<file>.ts` process with its own database, and then
 * prints every judged figure they wrote (the `judged` lists of bench/results/*.json: medians of
 * interleaved rounds, bench/pairs.ts) as one table, also in Markdown for docs/benchmarks.md, and
 * bench/results/summary.json. A failed scenario does not stop the others; the exit code is 1 if any
 * failed. `npm run bench -- --list` lists the scenarios. The whole run is meant to stay under
 * 15 minutes on the 2-core bench machine (a warning says when it did not).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Judged } from './pairs.ts';
import { formatFigure, formatVerdict } from './pairs.ts';
import { fmt, ROOT, table, writeResults } from './support.ts';

type Scenario = { name: string; file: string; env?: Record<string, string>; results: string; about: string };

const SCENARIOS: Scenario[] = [
  { name: 'run', file: 'bench/run.ts', results: 'latest.json', about: 'API reads and SMS acceptance against a bare baseline, HIPAA and live modes, drain, webhooks' },
  { name: 'graphql', file: 'bench/graphql-persisted.ts', results: 'graphql-persisted.json', about: 'GraphQL: persisted-by-id and cached reads against full documents' },
  { name: 'contacts', file: 'bench/contacts.ts', results: 'contacts.json', about: 'contacts list: statements per request, throughput' },
  { name: 'voice', file: 'bench/voice.ts', results: 'voice.json', about: 'calls accepted against the baseline, subscription latency' },
  {
    name: 'voice-stress', file: 'bench/voice.ts', results: 'voice-stress.json', about: 'voice, every call\'s lifecycle during the bursts (ring 50 ms, answer 100 ms)',
    env: { BENCH_VOICE_PROFILE: 'stress', BENCH_VOICE_RING_MS: '50', BENCH_VOICE_ANSWER_MS: '100' },
  },
  { name: 'voice-split', file: 'bench/voice.ts', results: 'voice-split.json', about: 'voice, HTTP and workers in two processes', env: { BENCH_VOICE_PROFILE: 'split', BENCH_VOICE_ROLES: 'split' } },
  { name: 'agents', file: 'bench/agents.ts', results: 'agents.json', about: 'agent chat streaming against a baseline' },
  { name: 'flows', file: 'bench/flows.ts', results: 'flows.json', about: 'flow executions per second, step latency, kills' },
  { name: 'campaigns', file: 'bench/campaigns.ts', results: 'campaigns.json', about: 'campaign fan-out and pacing' },
  { name: 'voice-media', file: 'bench/voice-media.ts', results: 'voice-media.json', about: 'media engine against rtpengine' },
  { name: 'voice-agent', file: 'bench/voice-agent.ts', results: 'voice-agent.json', about: 'voice agent speech round trip (caller stops speaking → first answer packet): hangover, STT, agent turn, TTS' },
  { name: 'carrier', file: 'bench/carrier.ts', results: 'carrier.json', about: 'SMPP connector against Kannel' },
  { name: 'twilio', file: 'bench/twilio.ts', results: 'twilio.json', about: 'Twilio-compatible route against the native send' },
];

/** Budget of the whole `npm run bench` (issue 44). */
const BUDGET_SECONDS = 15 * 60;

/** The scenarios `args` name (all when none); throws on an unknown name. */
function pickScenarios(args: readonly string[]): Scenario[] {
  const names = args.filter((a) => !a.startsWith('-'));
  if (!names.length) return SCENARIOS;
  return names.map((n) => {
    const s = SCENARIOS.find((x) => x.name === n);
    if (!s) throw new Error(`unknown scenario "${n}"; one of: ${SCENARIOS.map((x) => x.name).join(', ')}`);
    return s;
  });
}

function runOne(s: Scenario): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [s.file], { cwd: ROOT, env: { ...process.env, ...s.env }, stdio: 'inherit' });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    child.once('error', () => resolve(1));
  });
}

/** The judged figures a scenario's results file holds, if it was written by this run. */
function judgedOf(s: Scenario, since: number): Judged[] {
  const file = path.join(ROOT, 'bench', 'results', s.results);
  if (!existsSync(file)) return [];
  try {
    const data = JSON.parse(readFileSync(file, 'utf8')) as { written_at?: string; judged?: Judged[] };
    if (!data.written_at || Date.parse(data.written_at) < since) return [];
    return data.judged ?? [];
  } catch {
    return [];
  }
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.includes('--list') || args.includes('--help')) {
    const width = Math.max(...SCENARIOS.map((s) => s.name.length));
    process.stdout.write(`npm run bench [-- <scenario> …]\n${SCENARIOS.map((s) => `  ${s.name.padEnd(width)}  ${s.about}`).join('\n')}\n`);
    return 0;
  }
  let picked: Scenario[];
  try {
    picked = pickScenarios(args);
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    return 2;
  }
  const t0 = Date.now();
  const done: { name: string; exit_code: number; seconds: number; judged: Judged[] }[] = [];
  let interrupted = false;
  process.on('SIGINT', () => { interrupted = true; }); // the child gets it too (same process group) and cleans up
  for (const s of picked) {
    if (interrupted) break;
    process.stderr.write(`\n[bench] ${s.name}: node ${s.file}${s.env ? ` (${Object.entries(s.env).map(([k, v]) => `${k}=${v}`).join(' ')})` : ''}\n`);
    const started = Date.now();
    const code = await runOne(s);
    done.push({ name: s.name, exit_code: code, seconds: (Date.now() - started) / 1000, judged: judgedOf(s, started) });
    process.stderr.write(`[bench] ${s.name}: ${code === 0 ? 'done' : `FAILED (exit ${code})`} in ${fmt((Date.now() - started) / 1000, 0)} s\n`);
  }
  const total = (Date.now() - t0) / 1000;
  const rows = done.flatMap((d) => d.judged.map((j) => [`${d.name}: ${j.name}`, formatFigure(j), formatVerdict(j) || '–', Number.isFinite(j.foreign_cpu) ? `${fmt(j.foreign_cpu * 100, 0)}%` : 'n/a']));
  const out: string[] = ['', `bench: ${done.length} scenario(s) in ${fmt(total, 0)} s${picked.length === SCENARIOS.length && total > BUDGET_SECONDS ? ` — WARNING: over the ${BUDGET_SECONDS / 60}-minute budget` : ''}`];
  out.push(table([['scenario', 'exit', 'seconds'], ...done.map((d) => [d.name, String(d.exit_code), fmt(d.seconds, 0)])]));
  if (rows.length) {
    out.push('', 'judged figures (median of interleaved rounds, min–max):');
    out.push(table([['figure', 'median (min–max, pairs)', 'target / verdict', 'background'], ...rows]));
    out.push('', 'for docs/benchmarks.md:', '| figure | median (min–max, pairs) | target / verdict | background load |', '|---|---|---|---|', ...rows.map((r) => `| ${r.join(' | ')} |`));
  }
  process.stdout.write(`${out.join('\n')}\n`);
  const file = writeResults(picked.length === SCENARIOS.length ? 'summary.json' : `summary-${picked.map((s) => s.name).join('-')}.json`, {
    total_seconds: total, scenarios: done,
  });
  process.stderr.write(`[bench] summary in ${file}\n`);
  return done.some((d) => d.exit_code !== 0) || interrupted ? 1 : 0;
}

process.exit(await main());
