/**
 * Scenario 6 (overload) of `npm run faults`, and the process probes (RSS, descriptors) the soak
 * (bench/faults-soak.ts, scenario 7, described below) shares.
 *
 * 6. A ramp of closed-loop senders finds the sustained accepted rate S (the best 2xx rate of the
 *    levels) and the p99 at saturation (the first level within 5 % of S); then an open loop offers
 *    3×S for FAULTS_OVERLOAD_SECONDS, then 0.5×S for FAULTS_RECOVERY_SECONDS. The promise: the
 *    service sheds (503 SERVICE_UNAVAILABLE with Retry-After, or the spec's 429s) instead of
 *    queueing without bound: p99 of the accepted requests ≤ 3× its value at saturation, no request
 *    left unanswered, RSS bounded; and once the load drops the answers are normal at once (no
 *    shedding and p99 within 3× of saturation in the first second).
 * 7. An open loop at 0.5×S for FAULTS_SOAK_SECONDS with a workers process delivering: after the
 *    warm-up (a fifth of the run, at least 20 s), the gateway's and the workers' RSS grow ≤ 10 % (median of the
 *    last window against the first after the warm-up, and the end's idle checkpoint against the
 *    most held after the warm-up), so does the JavaScript heap each retains (after a full
 *    collection, at the idle checkpoints: bench/heap-probe.ts), their open file descriptors and the database's connections do not grow (connections: the
 *    fewest of 11 idle samples at the end ≤ the most after the warm-up, and no more connections
 *    idle past the pools' timeout), and the p99 of the steady phase's second half is within 1.5×
 *    of its first half's.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type pg from 'pg';
import { answersLine, closedLoop, openLoop, percentile, summarize, within, type Sample, type Summary } from './faults-load.ts';
import { cpuMark, cpuSince, fmt, machineBusySeconds, procCpuSeconds, sleep, table } from './support.ts';

export function rssMb(pid: number | undefined): number {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export function openFds(pid: number | undefined): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return NaN;
  }
}

type TcpSocket = { local: number; remote: number; listening: boolean };

/** `/proc/<pid>/net/tcp` (or tcp6) as socket inode → ports and whether it listens. */
export function parseProcNetTcp(text: string): Map<string, TcpSocket> {
  const out = new Map<string, TcpSocket>();
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const port = (addr: string) => parseInt(addr.split(':')[1] ?? '0', 16);
    out.set(f[9]!, { local: port(f[1]!), remote: port(f[2]!), listening: f[3] === '0A' });
  }
  return out;
}

/**
 * The open descriptors of `pid` by kind (`pipe`, `anon_inode:[eventpoll]`, a file path…), TCP
 * sockets by role: `socket listen`, `socket inbound` (a client connection to a listening port),
 * `socket database` (to `dbPort`), `socket → :6379` (other outbound), `socket other` (unix, udp).
 */
export function fdKinds(pid: number | undefined, o: { dbPort?: number } = {}): Record<string, number> {
  const kinds: Record<string, number> = {};
  let tcp: Map<string, TcpSocket> | undefined;
  const tcpTable = () => tcp ??= new Map(['tcp', 'tcp6'].flatMap((f) => {
    try { return [...parseProcNetTcp(readFileSync(`/proc/${pid}/net/${f}`, 'utf8'))]; } catch { return []; }
  }));
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      let target: string;
      try { target = readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { continue; }
      let kind = target.replace(/:\[\d+\]$/, '');
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) kind = socketKind(tcpTable(), inode, o.dbPort);
      kinds[kind] = (kinds[kind] ?? 0) + 1;
    }
  } catch { /* gone */ }
  return kinds;
}

function socketKind(table: Map<string, TcpSocket>, inode: string, dbPort: number | undefined): string {
  const s = table.get(inode);
  if (!s) return 'socket other';
  if (s.listening) return 'socket listen';
  const listening = [...table.values()].some((l) => l.listening && l.local === s.local);
  if (listening) return 'socket inbound';
  return s.remote === dbPort ? 'socket database' : `socket → :${s.remote}`;
}

/** Descriptors of a census but the database connections (judged on their own, from pg_stat_activity). */
export const fdsBesidesDatabase = (kinds: Record<string, number>) => Object.entries(kinds).reduce((n, [k, c]) => n + (k === 'socket database' ? 0 : c), 0);

/** What one descriptor census has more of than another (`socket +1`), for a growth verdict. */
export function fdGrowth(before: Record<string, number>, after: Record<string, number>): string {
  return Object.keys({ ...before, ...after })
    .map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)] as const)
    .filter(([, d]) => d !== 0)
    .map(([k, d]) => `${k} ${d > 0 ? '+' : ''}${d}`)
    .join(', ');
}

export type RampLevel = { clients: number } & Summary;
export type OverloadResult = {
  ramp: RampLevel[];
  sustained_per_second: number;
  saturation_clients: number;
  saturation_p99_ms: number;
  offered_per_second: number;
  overload: Summary & { shed: number; shed_p99_ms: number; shed_with_retry_after: number; skipped_by_harness: number; rss_mb_before: number; rss_mb_peak: number; rss_mb_after: number };
  recovery: Summary & { first_second: Summary; second_second: Summary; shedding_until_ms_after_drop: number };
  /** CPU cores used during the overload phase (CPU seconds per second): the machine has 2, shared with the harness. */
  /** Cores used under overload: the gateway, the harness, the database's backends, and everything else on the machine (other work sharing it). */
  cpu_cores_under_overload: { gateway: number; harness: number; database: number; others: number };
  /** The gateway's accept queue under overload (`ss`: connections the kernel holds for it to accept), largest seen and its bound. */
  accept_queue: { max: number; backlog: number } | null;
  /** The harness's own event-loop delay under overload (its timestamps are late by this much). */
  harness_loop_delay_ms: { p99: number; max: number };
  verdict: 'PASS' | 'FAIL';
  why: string[];
};

const isOk = (s: Sample) => s.status >= 200 && s.status < 300;
const isShed = (s: Sample) => s.status === 503 || s.status === 429;

/** Closed-loop levels of `levelSeconds` each; S is the best 2xx rate, saturation the first level within 5 % of it. */
export async function findSustainedRate(o: { port: () => number; keys: readonly string[]; levels: number[]; levelSeconds: number; log: (m: string) => void }): Promise<{ ramp: RampLevel[]; sustained: number; saturation: RampLevel }> {
  const ramp: RampLevel[] = [];
  for (const clients of o.levels) {
    const load = closedLoop({ port: o.port, keys: o.keys, clients });
    await sleep(o.levelSeconds * 1000);
    await load.stop();
    // The first half second is warm-up (new connections).
    const from = load.samples.reduce((m, s) => Math.min(m, s.at), Infinity) + 500;
    const level = { clients, ...summarize(load.samples.filter((s) => s.at >= from), o.levelSeconds - 0.5) };
    ramp.push(level);
    o.log(`ramp: ${clients} clients → ${level.ok_per_second}/s accepted, p99 ${level.p99_ok_ms} ms (${answersLine(level.by_answer)})`);
  }
  const sustained = Math.max(...ramp.map((l) => l.ok_per_second));
  const saturation = ramp.find((l) => l.ok_per_second >= 0.95 * sustained)!;
  return { ramp, sustained, saturation };
}

/**
 * What the workers carry to the end per second with the gateway accepting at `rate`: an open loop
 * for `seconds`, the messages reaching a final status (delivered, read, failed: a delivery job and
 * its status report both done) counted over its second half; then the load stops and the backlog
 * is left to drain (up to `drainSeconds`), so what follows starts from an empty queue. Counting
 * messages that merely left `queued` overstates it: the status reports then wait behind new sends.
 */
export async function findDeliveryRate(o: { port: () => number; keys: readonly string[]; rate: number; seconds: number; drainSeconds: number; db: pg.Client; log: (m: string) => void }): Promise<{ offered: number; delivered_per_second: number; drained_in_seconds: number | null }> {
  const done = async () => (await o.db.query<{ n: number }>(`select count(*)::int as n from messages where status in ('delivered', 'read', 'failed')`)).rows[0]!.n;
  const open = async () => (await o.db.query<{ n: number }>(`select count(*)::int as n from messages where status in ('queued', 'sent')`)).rows[0]!.n;
  const load = openLoop({ port: o.port, keys: o.keys, rate: o.rate });
  await sleep((o.seconds / 2) * 1000);
  const [from, t0] = [await done(), Date.now()];
  await sleep((o.seconds / 2) * 1000);
  const [to, t1] = [await done(), Date.now()];
  await load.stop();
  const delivered = Math.round(((to - from) / ((t1 - t0) / 1000)) * 10) / 10;
  const drainStart = Date.now();
  let drained: number | null = null;
  while (Date.now() - drainStart < o.drainSeconds * 1000) {
    if ((await open()) === 0) { drained = Math.round((Date.now() - drainStart) / 100) / 10; break; }
    await sleep(1000);
  }
  o.log(`delivery: ${delivered}/s carried to a final status with ${o.rate}/s offered; backlog ${drained === null ? `not drained in ${o.drainSeconds} s` : `drained in ${drained} s`}`);
  return { offered: o.rate, delivered_per_second: delivered, drained_in_seconds: drained };
}

/**
 * Samples the listening socket on `port` every 250 ms with `ss -lnt` (Recv-Q: connections waiting
 * to be accepted; Send-Q: the backlog). A full queue means the kernel drops new connections and
 * clients retry their SYN a second or more later. Null when `ss` is not there.
 */
export function watchAcceptQueue(port: number): { stop(): { max: number; backlog: number } | null } {
  let max = 0;
  let backlog = 0;
  let read = false;
  const timer = setInterval(() => {
    execFile('ss', ['-lntH', `sport = :${port}`], (err, out) => {
      if (err) return;
      const f = out.trim().split(/\s+/);
      if (f.length < 4) return;
      read = true;
      max = Math.max(max, Number(f[1]));
      backlog = Number(f[2]);
    });
  }, 250);
  return { stop: () => { clearInterval(timer); return read ? { max, backlog } : null; } };
}

export async function runOverload(o: {
  port: () => number; keys: readonly string[]; gatewayPid: () => number | undefined; log: (m: string) => void;
  levels: number[]; levelSeconds: number; overloadSeconds: number; recoverySeconds: number; factor: number;
  /** The gateway's database (its backends' CPU is counted apart from the rest of the machine). */
  database?: string;
}): Promise<OverloadResult> {
  const { log } = o;
  const { ramp, sustained, saturation } = await findSustainedRate(o);
  const offered = Math.round(sustained * o.factor);
  log(`overload: sustained ${sustained}/s (saturation at ${saturation.clients} clients, p99 ${saturation.p99_ok_ms} ms); offering ${offered}/s for ${o.overloadSeconds} s`);
  const rssBefore = rssMb(o.gatewayPid());
  let rssPeak = rssBefore;
  const rssTimer = setInterval(() => { rssPeak = Math.max(rssPeak, rssMb(o.gatewayPid())); }, 250);
  const acceptQueue = watchAcceptQueue(o.port());
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const over = openLoop({ port: o.port, keys: o.keys, rate: offered, maxOutstanding: 3000 });
  const overStart = Date.now();
  const cpu0 = { gateway: procCpuSeconds(o.gatewayPid()!) ?? NaN, harness: process.cpuUsage(), db: cpuMark(undefined, o.database), machine: machineBusySeconds() };
  await sleep(o.overloadSeconds * 1000);
  const dropAt = Date.now();
  loopDelay.disable();
  const accept = acceptQueue.stop();
  const harnessLoop = { p99: Math.round(loopDelay.percentile(99) / 1e5) / 10, max: Math.round(loopDelay.max / 1e5) / 10 };
  const harnessCpu = process.cpuUsage(cpu0.harness);
  const cores = (seconds: number) => Math.round(seconds / o.overloadSeconds * 100) / 100;
  const used = {
    gateway: (procCpuSeconds(o.gatewayPid()!) ?? NaN) - cpu0.gateway,
    harness: (harnessCpu.user + harnessCpu.system) / 1e6,
    database: o.database ? cpuSince(cpu0.db, undefined, o.database).db : NaN,
    machine: machineBusySeconds() - cpu0.machine,
  };
  const cpu = {
    gateway: cores(used.gateway), harness: cores(used.harness), database: cores(used.database),
    others: cores(used.machine - used.gateway - used.harness - (Number.isFinite(used.database) ? used.database : 0)),
  };
  log(`overload: CPU cores used, gateway ${cpu.gateway}, harness ${cpu.harness}, database ${cpu.database}, everything else ${cpu.others}; harness event-loop delay p99 ${harnessLoop.p99} ms, max ${harnessLoop.max} ms; accept queue max ${accept ? `${accept.max} of ${accept.backlog}` : 'not read (no ss)'}`);
  const rec = openLoop({ port: o.port, keys: o.keys, rate: Math.max(1, Math.round(sustained / 2)) });
  await over.stop();
  await sleep(o.recoverySeconds * 1000);
  await rec.stop();
  clearInterval(rssTimer);
  const rssAfter = rssMb(o.gatewayPid());

  const overSamples = within(over.samples, overStart, dropAt);
  const shed = overSamples.filter(isShed);
  const overSummary = summarize(overSamples, o.overloadSeconds);
  // The requests admitted before the drop still drain (at most HTTP_MAX_IN_FLIGHT of them, about a
  // second's work at S): judged from the second second on; the last shed answer's time is reported.
  const secondSecond = within(rec.samples, dropAt + 1000, dropAt + 2000);
  const lastShed = Math.max(dropAt, ...rec.samples.filter(isShed).map((s) => s.at + s.ms));
  const recovery = { ...summarize(rec.samples, o.recoverySeconds), first_second: summarize(within(rec.samples, dropAt, dropAt + 1000), 1),
    second_second: summarize(secondSecond, 1), shedding_until_ms_after_drop: Math.round(lastShed - dropAt) };
  const why: string[] = [];
  const p99Bound = 3 * saturation.p99_ok_ms;
  if (!(overSummary.p99_ok_ms <= p99Bound)) why.push(`p99 of accepted requests under overload ${overSummary.p99_ok_ms} ms > 3 × ${saturation.p99_ok_ms} ms`);
  if (shed.length === 0) why.push('nothing was shed');
  if ((overSummary.by_answer['no answer'] ?? 0) > 0) why.push(`${overSummary.by_answer['no answer']} requests unanswered within 10 s`);
  if (overSamples.some((s) => s.status >= 500 && s.status !== 503)) why.push('5xx other than 503 under overload');
  if (secondSecond.some((s) => !isOk(s)) || !(recovery.second_second.p99_ok_ms <= p99Bound)) {
    why.push(`not normal in the second second after the drop (${answersLine(recovery.second_second.by_answer)}, p99 ${recovery.second_second.p99_ok_ms} ms)`);
  }
  if (within(rec.samples, dropAt + 1000, Infinity).some((s) => !isOk(s))) why.push(`non-2xx answers after the first second after the drop: ${answersLine(recovery.by_answer)}`);
  return {
    ramp, sustained_per_second: sustained, saturation_clients: saturation.clients, saturation_p99_ms: saturation.p99_ok_ms, offered_per_second: offered,
    overload: {
      ...overSummary, shed: shed.length, shed_p99_ms: Math.round(percentile(shed.map((s) => s.ms), 99) * 10) / 10,
      shed_with_retry_after: shed.filter((s) => s.retryAfter !== undefined).length, skipped_by_harness: over.skipped(),
      rss_mb_before: Math.round(rssBefore), rss_mb_peak: Math.round(rssPeak), rss_mb_after: Math.round(rssAfter),
    },
    cpu_cores_under_overload: cpu, harness_loop_delay_ms: harnessLoop, accept_queue: accept, recovery, verdict: why.length ? 'FAIL' : 'PASS', why,
  };
}

export function overloadReport(r: OverloadResult, factor: number): string[] {
  return [
    `scenario 6 — overload (${factor}× the sustained rate, open loop, one --no-workers gateway): ${r.verdict}`,
    table([
      ['figure', 'value'],
      ...r.ramp.map((l) => [`ramp: ${l.clients} closed-loop clients`, `${l.ok_per_second}/s accepted, p99 ${fmt(l.p99_ok_ms)} ms`]),
      ['sustained accepted rate S', `${r.sustained_per_second}/s`],
      ['p99 at saturation', `${fmt(r.saturation_p99_ms)} ms (${r.saturation_clients} clients)`],
      ['offered under overload', `${r.offered_per_second}/s (${r.overload.requests} sent, ${r.overload.skipped_by_harness} skipped by the harness's bound)`],
      ['accepted under overload', `${r.overload.ok_per_second}/s, p50 ${fmt(r.overload.p50_ok_ms)} ms, p99 ${fmt(r.overload.p99_ok_ms)} ms`],
      ['shed (503/429)', `${r.overload.shed} (${r.overload.shed_with_retry_after} with Retry-After), p99 ${fmt(r.overload.shed_p99_ms)} ms`],
      ['answers under overload', answersLine(r.overload.by_answer)],
      ['CPU cores used under overload: gateway / harness / database / everything else', `${r.cpu_cores_under_overload.gateway} / ${r.cpu_cores_under_overload.harness} / ${r.cpu_cores_under_overload.database} / ${r.cpu_cores_under_overload.others}`],
      ['harness event-loop delay under overload p99 / max', `${r.harness_loop_delay_ms.p99} / ${r.harness_loop_delay_ms.max} ms`],
      ['gateway accept queue under overload: largest / backlog', r.accept_queue ? `${r.accept_queue.max} / ${r.accept_queue.backlog}` : 'not read (no ss)'],
      ['gateway RSS before / peak / after', `${r.overload.rss_mb_before} / ${r.overload.rss_mb_peak} / ${r.overload.rss_mb_after} MB`],
      ['after the drop (0.5×S): first second', `${answersLine(r.recovery.first_second.by_answer)}; p99 ${fmt(r.recovery.first_second.p99_ok_ms)} ms`],
      ['after the drop: second second', `${answersLine(r.recovery.second_second.by_answer)}; p99 ${fmt(r.recovery.second_second.p99_ok_ms)} ms`],
      ['last shed answer after the drop', `${r.recovery.shedding_until_ms_after_drop} ms`],
      ['after the drop: whole phase', `${answersLine(r.recovery.by_answer)}; p99 ${fmt(r.recovery.p99_ok_ms)} ms`],
    ]),
    ...r.why.map((w) => `  FAIL: ${w}`),
    ...(r.cpu_cores_under_overload.others >= 0.25
      ? [`  NOTE: other work on this machine took ${r.cpu_cores_under_overload.others} cores during the overload: the gateway competed for the CPU (docs/faults.md, scenario 6)`]
      : []),
    '',
  ];
}
