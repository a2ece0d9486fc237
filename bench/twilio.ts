/**
 * `node bench/twilio.ts` (part of `npm run bench`): SMS created per second through the
 * Twilio-compatible route (`POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, a form body,
 * Basic credentials) against the native `POST /v1/messages/sms` (JSON, X-API-Key), in the same run.
 *
 *   1. a fresh database `omni_bench_twilio_<pid>` on 127.0.0.1:5432 (dropped at the end), an
 *      enterprise organization (admin CLI, which migrates);
 *   2. this service (`node src/main.ts --no-workers`: acceptance only, the queued messages wait),
 *      BENCH_TWILIO_KEYS (32) owner test keys, rotated per request on both surfaces (the Twilio
 *      route counts against the native bucket, so neither meets the per-key limits);
 *   3. BENCH_TWILIO_ROUNDS (BENCH_PAIRS, 5) interleaved rounds (bench/pairs.ts), each a native batch
 *      and a Twilio batch (order reversed every other round, so drift favours neither) of
 *      BENCH_TWILIO_MESSAGES (2,000) sends over BENCH_TWILIO_CONNECTIONS (16) kept-alive connections;
 *      a 201 (Twilio) or 202/201 (native) is a created message;
 *   4. per surface: messages created per second over all its batches, p50/p99, CPU per message of
 *      the service process; the ratio Twilio ÷ native per round, judged on its median (target ≥ 0.9;
 *      not judged under background load), bench/results/twilio.json.
 */
import { accountSid } from '../src/twilio/sids.ts';
import { runBatch, type BatchResult, type RequestSpec } from './load.ts';
import { createLoadMeter, formatFigure, formatLoad, formatVerdict, interleave, pairSettings } from './pairs.ts';
import {
  benchOrganization, cpuMark, cpuSince, createCleanup, createKeys, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, startChild, table, waitReady, writeResults,
} from './support.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);
const MESSAGES = intEnv('BENCH_TWILIO_MESSAGES', 2_000, 10);
const ROUNDS = intEnv('BENCH_TWILIO_ROUNDS', pairSettings().rounds);
const CONNECTIONS = intEnv('BENCH_TWILIO_CONNECTIONS', 16);
const KEYS = intEnv('BENCH_TWILIO_KEYS', 32);
const TARGET = 0.9;

const log = createLog('bench:twilio');
const { onCleanup, cleanup } = createCleanup(log);
const hooks = { log, onCleanup };

type Surface = 'native' | 'twilio';

async function main(): Promise<void> {
  const database = `omni_bench_twilio_${process.pid}`;
  const dbUrl = await freshLocalDatabase(database, onCleanup);
  const meter = createLoadMeter([database]);
  onCleanup('load meter', async () => meter.stop());
  const { baseEnv, org } = await benchOrganization(dbUrl, hooks);
  const port = await freePort();
  const service = startChild('service', ['src/main.ts', '--no-workers'], { ...baseEnv, PORT: String(port), HOST: '127.0.0.1', SERVER_TIMING: 'false' }, hooks);
  await waitReady(service, port, '/readyz');
  const keys = await createKeys(port, org.test_api_key, KEYS);
  const sid = accountSid(org.organization_id, 'test');
  log(`service on :${port} (pid ${service.proc.pid}), ${keys.length} owner test keys, account ${sid}`);

  let sent = 0;
  const to = () => `+1415${String(2_000_000 + (sent++ % 7_000_000)).padStart(7, '0')}`;
  const basic = keys.map((k) => `Basic ${Buffer.from(`${sid}:${k}`).toString('base64')}`);
  const request: Record<Surface, (i: number) => RequestSpec> = {
    native: (i) => ({
      method: 'POST', path: '/v1/messages/sms', headers: { 'X-API-Key': keys[i % keys.length]!, 'Content-Type': 'application/json' },
      body: JSON.stringify({ to: to(), body: `bench native ${i}` }),
    }),
    twilio: (i) => ({
      method: 'POST', path: `/2010-04-01/Accounts/${sid}/Messages.json`, headers: { Authorization: basic[i % basic.length]!, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ To: to(), Body: `bench twilio ${i}` }).toString(),
    }),
  };

  // A short warm-up of each (JIT, pools, caches), not counted.
  for (const s of ['native', 'twilio'] as const) await runBatch({ port, connections: CONNECTIONS, total: Math.min(200, MESSAGES), request: request[s] });

  const cpu: Record<Surface, number> = { native: 0, twilio: 0 };
  const side = (s: Surface) => ({
    name: s,
    run: async (round: number): Promise<BatchResult> => {
      const mark = cpuMark(service.proc.pid, database);
      const r = await runBatch({ port, connections: CONNECTIONS, total: MESSAGES, request: request[s] });
      cpu[s] += cpuSince(mark, service.proc.pid, database).proc;
      if (r.errors) log(`${s} round ${round + 1}: ${r.errors} errors (${JSON.stringify(r.statuses)}), e.g. ${r.sampleError}`);
      log(`round ${round + 1} ${s}: ${fmt(r.rps)} msg/s, p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms`);
      return r;
    },
  });
  const pairs = await interleave<BatchResult>({
    sides: [side('native'), side('twilio')], meter, rounds: ROUNDS, rate: (r) => r.rps,
    ratios: [{ name: 'Twilio ÷ native (messages created per second)', numerator: 'twilio', denominator: 'native', target: { op: '>=', value: TARGET } }],
  });
  const batches = pairs.results as Record<Surface, BatchResult[]>;
  const judged = pairs.ratios[0]!;

  const summary = (s: Surface) => {
    const ok = batches[s].reduce((a, b) => a + b.ok, 0);
    const seconds = batches[s].reduce((a, b) => a + b.elapsedMs, 0) / 1000;
    const errors = batches[s].reduce((a, b) => a + b.errors, 0);
    return {
      created: ok, errors, rate: ok / seconds, p50: median(batches[s].map((b) => b.p50)), p99: median(batches[s].map((b) => b.p99)),
      cpu_ms_per_message: ok ? (cpu[s] * 1000) / ok : NaN,
    };
  };
  const native = summary('native');
  const twilio = summary('twilio');
  const ratio = judged.median;
  console.log(`\n${table([
    ['surface', 'created', 'errors', 'msg/s', 'p50 ms', 'p99 ms', 'CPU ms/msg'],
    ...([['native POST /v1/messages/sms', native], ['Twilio Messages.json', twilio]] as const).map(([name, r]) => [
      name, String(r.created), String(r.errors), fmt(r.rate), fmt(r.p50), fmt(r.p99), fmt(r.cpu_ms_per_message, 2),
    ]),
  ])}\n\nTwilio ÷ native per round: ${formatFigure(judged)} ${formatVerdict(judged)}\n${formatLoad(pairs.load)}\n`);
  const file = writeResults('twilio.json', {
    messages_per_batch: MESSAGES, rounds: ROUNDS, connections: CONNECTIONS, keys: KEYS, native, twilio, ratio, target: TARGET, met: judged.verdict === 'met',
    judged: [judged], load: pairs.load,
  });
  log(`results in ${file}`);
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
}

await runMain(main, log, cleanup);
