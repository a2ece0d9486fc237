/**
 * `node bench/carrier.ts` (part of `npm run bench`): live SMS end to end through SMPP — REST accept
 * → submit_sm → delivery receipt → delivered — side by side with Kannel (Debian `kannel`), the
 * open-source SMS gateway, sending through the same SMSC in the same run.
 *
 *   1. a fresh database `omni_bench_carrier_<pid>` on 127.0.0.1:5432 (dropped at the end), an
 *      enterprise organization (admin CLI, which migrates);
 *   2. the SMSC: test/peers/smsc-node.ts (the `smpp` package's server) in its own process, quiet,
 *      answering every submit_sm and returning a receipt BENCH_CARRIER_RECEIPT_MS (100) later;
 *   3. its ceiling: a bare ESME on the `smpp` package (BENCH_CARRIER_BINDS binds, BENCH_CARRIER_WINDOW
 *      submits in flight each) submitting for BENCH_CARRIER_CEILING_SECONDS (5): submits answered per
 *      second and receipts per second;
 *   4. this service (`node src/main.ts`, workers in the same process), a live sender with funds, an
 *      SMPP connector (the same binds and window, throughput 10,000) and a route; BENCH_CARRIER_MESSAGES
 *      (5,000) `POST /v1/messages/sms` with live keys over BENCH_CARRIER_CONNECTIONS (32) connections;
 *      timed from the first request until the last message is `delivered` in the database (receipts
 *      applied): messages per second, CPU per message of the service process and of PostgreSQL, and of
 *      the SMSC;
 *   5. Kannel 1.4.5: bearerbox (the same binds as transceivers, max-pending-submits = the window) and
 *      smsbox; the same number of `GET /cgi-bin/sendsms` with `dlr-mask=1` and a `dlr-url` on a local
 *      receiver, timed until the last delivery callback arrived: messages per second, CPU per message
 *      of bearerbox + smsbox, and of the SMSC. Without /usr/sbin/bearerbox the comparison is skipped;
 *   6. with BENCH_CARRIER_SANDBOX=1, step 4 again through the sandbox provider in live mode
 *      (MESSAGING_LIVE_SANDBOX, its report as long after the send as the receipt): what SMPP adds;
 *   7. a table (target: this service ≥ 1.0 × Kannel's rate), bench/results/carrier.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import smpp, { type PDU } from 'smpp';
import { fundLiveSends } from './messaging-modes.ts';
import { runBatch } from './load.ts';
import {
  answers, benchOrganization, call, cpuMark, cpuSince, createCleanup, createKeys, createLog, envNumber, fmt, freePort, freshLocalDatabase, procCpuSeconds,
  ROOT, runMain, sleep, startChild, table, waitReady, writeResults,
} from './support.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);
const MESSAGES = intEnv('BENCH_CARRIER_MESSAGES', 5_000, 10);
const CONNECTIONS = intEnv('BENCH_CARRIER_CONNECTIONS', 32);
const BINDS = intEnv('BENCH_CARRIER_BINDS', 2);
const WINDOW = intEnv('BENCH_CARRIER_WINDOW', 64);
const RECEIPT_MS = intEnv('BENCH_CARRIER_RECEIPT_MS', 100, 0);
const CEILING_SECONDS = intEnv('BENCH_CARRIER_CEILING_SECONDS', 5);
const TIMEOUT_SECONDS = intEnv('BENCH_CARRIER_TIMEOUT_SECONDS', 300);
const SANDBOX = process.env.BENCH_CARRIER_SANDBOX === '1';
const KEYS = intEnv('BENCH_CARRIER_KEYS', 64);
const SYSTEM_ID = 'bench';
const PASSWORD = 'secret';
const SENDER = '+15005550006';

const log = createLog('bench:carrier');
const { onCleanup, cleanup } = createCleanup(log);
const hooks = { log, onCleanup };

type Smsc = { port: number; pid: number; stats(): Promise<{ submits: number; receipts: number; receipts_acked: number; receipts_refused: number }> };

async function startSmsc(): Promise<Smsc> {
  const proc = spawn(process.execPath, [path.join(ROOT, 'test/peers/smsc-node.ts'), '0', SYSTEM_ID, PASSWORD, 'quiet'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  onCleanup('smsc', async () => { proc.kill('SIGKILL'); });
  const waiting: ((e: Record<string, unknown>) => void)[] = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const e = JSON.parse(line) as Record<string, unknown>;
    for (const w of waiting.splice(0)) w(e);
  });
  const next = (event: string) => new Promise<Record<string, unknown>>((resolve) => {
    const wait = (e: Record<string, unknown>) => (e.event === event ? resolve(e) : waiting.push(wait));
    waiting.push(wait);
  });
  const listening = await next('listening');
  const command = async (cmd: Record<string, unknown>, answer: string) => {
    const got = next(answer);
    proc.stdin!.write(`${JSON.stringify(cmd)}\n`);
    return got;
  };
  await command({ cmd: 'receipt_delay', ms: RECEIPT_MS }, 'ok');
  return {
    port: listening.port as number, pid: proc.pid!,
    stats: async () => (await command({ cmd: 'stats' }, 'stats')) as unknown as { submits: number; receipts: number; receipts_acked: number; receipts_refused: number },
  };
}

/** The SMSC driven by a bare ESME (the `smpp` package's client): its own ceiling. */
async function ceiling(smsc: Smsc): Promise<{ submits_per_s: number; receipts_per_s: number; smsc_cpu_ms_per_message: number }> {
  const before = await smsc.stats();
  const cpu0 = procCpuSeconds(smsc.pid) ?? NaN;
  let answered = 0;
  let receipts = 0;
  let running = true;
  const sessions = await Promise.all(Array.from({ length: BINDS }, () => new Promise<ReturnType<typeof smpp.connect>>((resolve, reject) => {
    const s = smpp.connect({ host: '127.0.0.1', port: smsc.port });
    s.on('error', reject);
    s.on('connect', () => {
      s.send(new smpp.PDU('bind_transceiver', { system_id: SYSTEM_ID, password: PASSWORD }), (r: PDU) => (r.command_status === 0 ? resolve(s) : reject(new Error('bind refused'))));
    });
    s.on('deliver_sm', (pdu: PDU) => { receipts++; s.send(pdu.response()); });
  })));
  const t0 = performance.now();
  let n = 0;
  const submit = (s: ReturnType<typeof smpp.connect>) => {
    if (!running) return;
    s.send(new smpp.PDU('submit_sm', {
      source_addr_ton: 1, source_addr_npi: 1, source_addr: SENDER.slice(1), dest_addr_ton: 1, dest_addr_npi: 1,
      destination_addr: `447911${String(n++ % 1_000_000).padStart(6, '0')}`, registered_delivery: 1, data_coding: 0, short_message: Buffer.from('ceiling'),
    }), () => { answered++; submit(s); });
  };
  for (const s of sessions) for (let i = 0; i < WINDOW; i++) submit(s);
  await sleep(CEILING_SECONDS * 1000);
  running = false;
  const seconds = (performance.now() - t0) / 1000;
  const counted = { answered, receipts };
  await sleep(500);
  for (const s of sessions) s.destroy();
  const after = await smsc.stats();
  const cpu = (procCpuSeconds(smsc.pid) ?? NaN) - cpu0;
  return { submits_per_s: counted.answered / seconds, receipts_per_s: counted.receipts / seconds, smsc_cpu_ms_per_message: (cpu * 1000) / (after.submits - before.submits) };
}

type Setup = Awaited<ReturnType<typeof benchOrganization>> & { database: string; connectorId?: string };

/**
 * This service end to end: through the SMPP connector, or (`sandbox`, the diagnostic of
 * BENCH_CARRIER_SANDBOX=1) through the sandbox provider in live mode (MESSAGING_LIVE_SANDBOX, a
 * `delivered` report as long after the send as the SMSC's receipt), to see what SMPP adds.
 */
async function service(setup: Setup, smsc: Smsc, through: 'smpp' | 'sandbox') {
  const { baseEnv, org, monitor, database } = setup;
  const port = await freePort();
  // No lag-driven shedding (HTTP_MAX_LOOP_DELAY_MS=0): a loaded machine would answer some sends 503, which Kannel never does.
  const env = {
    ...baseEnv, PORT: String(port), MESSAGING_DELIVERY_CONCURRENCY: '64', MESSAGING_CARRIER_SEND_TIMEOUT_MS: '30000', HTTP_MAX_LOOP_DELAY_MS: '0',
    ...(through === 'sandbox' ? { MESSAGING_LIVE_SANDBOX: 'true', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: String(RECEIPT_MS) } : {}),
  };
  const proc = startChild(`service (${through})`, ['src/main.ts'], env, hooks);
  await waitReady(proc, port, '/readyz');
  const key = org.live_api_key;
  const api = async (method: string, p: string, body?: unknown) => {
    const r = await call(port, method, p, { 'X-API-Key': key, 'Content-Type': 'application/json' }, body === undefined ? undefined : JSON.stringify(body));
    if (r.status >= 300) throw new Error(`${method} ${p} → ${r.status} ${r.body}`);
    return (JSON.parse(r.body) as { data: Record<string, unknown> }).data;
  };
  if (!setup.connectorId) {
    await fundLiveSends(port, monitor, org.organization_id, key);
    const connector = await api('POST', '/v1/messages/connectors', {
      name: 'bench', kind: 'smpp', smpp: { host: '127.0.0.1', port: smsc.port, system_id: SYSTEM_ID, password: PASSWORD, binds: BINDS, window: WINDOW, throughput: 10_000 },
    });
    setup.connectorId = String(connector.id);
    await api('POST', '/v1/messages/routes', { connector_id: connector.id, prefix: '+44' });
  }
  for (let i = 0; through === 'smpp'; i++) {
    const status = (await api('GET', `/v1/messages/connectors/${setup.connectorId}`)).status as { state: string };
    if (status.state === 'connected') break;
    if (i > 600) throw new Error(`the connector did not connect: ${JSON.stringify(status)}`);
    await sleep(100);
  }
  const keys = await createKeys(port, key, KEYS);
  const deliveredSoFar = async () => (await monitor.query(`select count(*)::int as n from messages where organization_id = $1 and mode = 'live' and status = 'delivered'`, [org.organization_id])).rows[0].n as number;
  const before = await deliveredSoFar();
  const delivered = async () => (await deliveredSoFar()) - before;
  const smsc0 = await smsc.stats();
  const smscCpu0 = procCpuSeconds(smsc.pid) ?? NaN;
  const mark = cpuMark(proc.proc.pid, database);
  const t0 = performance.now();
  const batch = await runBatch({
    port, connections: CONNECTIONS, total: MESSAGES,
    request: (i) => ({
      method: 'POST', path: '/v1/messages/sms', headers: { 'X-API-Key': keys[i % keys.length]!, 'Content-Type': 'application/json' },
      body: JSON.stringify({ to: `+447911${String(i).padStart(6, '0')}`, body: `bench message ${i}` }),
    }),
    accept: (s) => s === 201,
  });
  if (batch.errors > 0) throw new Error(`${batch.errors} sends failed: ${batch.sampleError}`);
  for (let last = -1, stalled = performance.now(); ; await sleep(100)) {
    const done = await delivered();
    if (done >= MESSAGES) break;
    if (done !== last) { last = done; stalled = performance.now(); }
    if (performance.now() - stalled > 30_000 || performance.now() - t0 > TIMEOUT_SECONDS * 1000) throw new Error(`${done} of ${MESSAGES} delivered`);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSince(mark, proc.proc.pid, database);
  const smsc1 = await smsc.stats();
  const smscCpu = (procCpuSeconds(smsc.pid) ?? NaN) - smscCpu0;
  if (proc.logLines.warn + proc.logLines.error > 0) log(`service logged ${proc.logLines.warn} warnings and ${proc.logLines.error} errors; the first: ${proc.sampleWarning()}`);
  await proc.stop();
  return {
    accept_per_s: batch.rps, messages_per_s: MESSAGES / seconds, seconds,
    cpu_ms_per_message: { service: (cpu.proc * 1000) / MESSAGES, postgres: (cpu.db * 1000) / MESSAGES, smsc: (smscCpu * 1000) / MESSAGES },
    smsc: { submits: smsc1.submits - smsc0.submits, receipts_sent: smsc1.receipts - smsc0.receipts, receipts_acked: smsc1.receipts_acked - smsc0.receipts_acked, receipts_refused: smsc1.receipts_refused - smsc0.receipts_refused },
  };
}

async function kannel(smsc: Smsc) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-kannel-'));
  onCleanup('kannel directory', async () => rmSync(dir, { recursive: true, force: true }));
  const [admin, box, sendsms, receiver] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const smscGroups = Array.from({ length: BINDS }, () => `group = smsc
smsc = smpp
smsc-id = bench
host = 127.0.0.1
port = ${smsc.port}
transceiver-mode = true
smsc-username = ${SYSTEM_ID}
smsc-password = ${PASSWORD}
system-type = ""
max-pending-submits = ${WINDOW}
enquire-link-interval = 30
`).join('\n');
  const conf = path.join(dir, 'kannel.conf');
  writeFileSync(conf, `group = core
admin-port = ${admin}
admin-password = bench
smsbox-port = ${box}
log-level = 4
log-file = "${path.join(dir, 'bearerbox.log')}"
box-allow-ip = 127.0.0.1
dlr-storage = internal

${smscGroups}
group = smsbox
bearerbox-host = 127.0.0.1
bearerbox-port = ${box}
sendsms-port = ${sendsms}
log-level = 4
log-file = "${path.join(dir, 'smsbox.log')}"

group = sendsms-user
username = bench
password = bench
max-messages = 10
`);
  let callbacks = 0;
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/dlr')) callbacks++;
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(receiver, '127.0.0.1', () => r()));
  onCleanup('dlr receiver', () => new Promise((r) => server.close(() => r())));
  const startBox = (bin: string): ChildProcess => {
    const p = spawn(bin, [conf], { stdio: 'ignore' });
    onCleanup(path.basename(bin), async () => {
      if (p.exitCode !== null) return;
      p.kill('SIGTERM');
      await Promise.race([new Promise((r) => p.once('exit', r)), sleep(5000).then(() => p.kill('SIGKILL'))]);
    });
    return p;
  };
  const bearerbox = startBox('/usr/sbin/bearerbox');
  for (let i = 0; !(await answers('127.0.0.1', box)); i++) { if (i > 100) throw new Error('bearerbox did not start'); await sleep(100); }
  const smsbox = startBox('/usr/sbin/smsbox');
  for (let i = 0; !(await answers('127.0.0.1', sendsms)); i++) { if (i > 100) throw new Error('smsbox did not start'); await sleep(100); }
  // Both binds up: the admin status lists the SMSC connections as online.
  for (let i = 0; ; i++) {
    const status = await call(admin, 'GET', '/status.txt?password=bench');
    if ((status.body.match(/online/g) ?? []).length >= BINDS) break;
    if (i > 100) throw new Error(`Kannel's binds did not come up:\n${status.body}`);
    await sleep(100);
  }
  const dlrUrl = encodeURIComponent(`http://127.0.0.1:${receiver}/dlr?id=%i&status=%d`);
  const cpuOf = () => (procCpuSeconds(bearerbox.pid!) ?? NaN) + (procCpuSeconds(smsbox.pid!) ?? NaN);
  const smsc0 = await smsc.stats();
  const smscCpu0 = procCpuSeconds(smsc.pid) ?? NaN;
  const cpu0 = cpuOf();
  const t0 = performance.now();
  const batch = await runBatch({
    port: sendsms, connections: CONNECTIONS, total: MESSAGES,
    request: (i) => ({
      method: 'GET', headers: {},
      path: `/cgi-bin/sendsms?username=bench&password=bench&from=${encodeURIComponent(SENDER)}&to=${encodeURIComponent(`+447911${String(i).padStart(6, '0')}`)}&text=${encodeURIComponent(`bench message ${i}`)}&dlr-mask=1&dlr-url=${dlrUrl}`,
    }),
    accept: (s) => s === 202,
  });
  if (batch.errors > 0) throw new Error(`${batch.errors} Kannel sends failed: ${batch.sampleError}`);
  for (let last = -1, stalled = performance.now(); callbacks < MESSAGES; await sleep(100)) {
    if (callbacks !== last) { last = callbacks; stalled = performance.now(); }
    if (performance.now() - stalled > 30_000 || performance.now() - t0 > TIMEOUT_SECONDS * 1000) throw new Error(`${callbacks} of ${MESSAGES} Kannel delivery callbacks`);
  }
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuOf() - cpu0;
  const smsc1 = await smsc.stats();
  const smscCpu = (procCpuSeconds(smsc.pid) ?? NaN) - smscCpu0;
  return {
    accept_per_s: batch.rps, messages_per_s: MESSAGES / seconds, seconds,
    cpu_ms_per_message: { kannel: (cpu * 1000) / MESSAGES, smsc: (smscCpu * 1000) / MESSAGES },
    smsc: { submits: smsc1.submits - smsc0.submits, receipts_sent: smsc1.receipts - smsc0.receipts, receipts_acked: smsc1.receipts_acked - smsc0.receipts_acked, receipts_refused: smsc1.receipts_refused - smsc0.receipts_refused },
  };
}

async function main(): Promise<void> {
  if (!(await answers('127.0.0.1', 5432))) throw new Error('no PostgreSQL on 127.0.0.1:5432');
  const dbUrl = await freshLocalDatabase(`omni_bench_carrier_${process.pid}`, onCleanup);
  const smsc = await startSmsc();
  const top = await ceiling(smsc);
  log(`SMSC ceiling: ${fmt(top.submits_per_s, 0)} submits/s answered, ${fmt(top.receipts_per_s, 0)} receipts/s`);
  const setup: Setup = { ...(await benchOrganization(dbUrl, hooks)), database: new URL(dbUrl).pathname.slice(1) };
  const ours = await service(setup, smsc, 'smpp');
  log(`this service: ${MESSAGES} delivered in ${fmt(ours.seconds)} s = ${fmt(ours.messages_per_s, 0)} msg/s (accepted at ${fmt(ours.accept_per_s, 0)}/s)`);
  const sandbox = SANDBOX ? await service(setup, smsc, 'sandbox') : undefined;
  if (sandbox) log(`this service through the sandbox provider: ${fmt(sandbox.messages_per_s, 0)} msg/s`);
  const theirs = existsSync('/usr/sbin/bearerbox') ? await kannel(smsc) : undefined;
  if (theirs) log(`Kannel: ${MESSAGES} delivery callbacks in ${fmt(theirs.seconds)} s = ${fmt(theirs.messages_per_s, 0)} msg/s (accepted at ${fmt(theirs.accept_per_s, 0)}/s)`);
  else log('Kannel is not installed (apt-get install -y kannel): no comparison');
  const ratio = theirs ? ours.messages_per_s / theirs.messages_per_s : NaN;
  console.log(table([
    ['figure', 'value', 'target'],
    [`SMSC ceiling, bare ESME (${BINDS} binds × window ${WINDOW}): submits/s, receipts/s`, `${fmt(top.submits_per_s, 0)} / ${fmt(top.receipts_per_s, 0)}`, ''],
    [`this service: REST → submit_sm → receipt → delivered (${MESSAGES} msgs, msg/s)`, fmt(ours.messages_per_s, 0), ''],
    ['  CPU ms per message: service / PostgreSQL / SMSC', `${fmt(ours.cpu_ms_per_message.service, 2)} / ${fmt(ours.cpu_ms_per_message.postgres, 2)} / ${fmt(ours.cpu_ms_per_message.smsc, 2)}`, ''],
    ...(sandbox ? [
      ['the same through the sandbox provider (live mode, no SMPP; msg/s)', fmt(sandbox.messages_per_s, 0), ''],
      ['  CPU ms per message: service / PostgreSQL', `${fmt(sandbox.cpu_ms_per_message.service, 2)} / ${fmt(sandbox.cpu_ms_per_message.postgres, 2)}`, ''],
    ] : []),
    ...(theirs ? [
      [`Kannel: sendsms → submit_sm → receipt → dlr-url (${MESSAGES} msgs, msg/s)`, fmt(theirs.messages_per_s, 0), ''],
      ['  CPU ms per message: bearerbox + smsbox / SMSC', `${fmt(theirs.cpu_ms_per_message.kannel, 2)} / ${fmt(theirs.cpu_ms_per_message.smsc, 2)}`, ''],
      ['this service ÷ Kannel', fmt(ratio, 2), '≥ 1.0'],
    ] : []),
  ]));
  log(`results: ${writeResults('carrier.json', { messages: MESSAGES, connections: CONNECTIONS, binds: BINDS, window: WINDOW, receipt_ms: RECEIPT_MS, smsc_ceiling: top, service: ours, sandbox: sandbox ?? null, kannel: theirs ?? null, ratio: Number.isFinite(ratio) ? ratio : null })}`);
}

await runMain(main, log, cleanup);
