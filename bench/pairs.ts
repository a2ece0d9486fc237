/**
 * Judged ratios measured as interleaved rounds (issue 44): every side of a ratio runs once per round,
 * in forward order on even rounds and reverse order on odd ones (A B, B A, A B …), so drift (tables
 * growing, caches warming, a neighbour's load) weighs on both sides alike. Each round gives one value
 * per ratio; the figure is the median over the rounds with its min–max, and a target is met when the
 * median meets it.
 *
 * While the rounds run, a load meter samples the machine: CPU time of the whole machine
 * (/proc/stat) minus that of this bench's own processes (this process, its descendants, and the
 * PostgreSQL backends of the bench's database, from /proc/<pid>/stat). When other processes took
 * more than BENCH_MAX_FOREIGN_CPU (0.15) of the machine's CPU, the figures are printed but not
 * judged ("not judged: background load X%"). Fewer than BENCH_MIN_PAIRS (5) valid rounds are not
 * judged either.
 *
 * Knobs: BENCH_PAIRS (5) rounds, BENCH_MAX_FOREIGN_CPU (0.15; 1 turns the refusal off),
 * BENCH_LOAD_SAMPLE_MS (1000) between load samples.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { envNumber, fmt, machineBusySeconds, procPids, procStat } from './support.ts';

// ---------------------------------------------------------------------------------------------
// Pure logic (bench/pairs.test.ts).
// ---------------------------------------------------------------------------------------------

/** Median, min and max of the finite values (NaN when there are none). */
export function summarize(values: readonly number[]): { median: number; min: number; max: number; n: number } {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (!v.length) return { median: NaN, min: NaN, max: NaN, n: 0 };
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  return { median, min: v[0]!, max: v[v.length - 1]!, n: v.length };
}

/** The order of `sides` in round `round` (0-based): forward on even rounds, reversed on odd ones. */
export function roundOrder<T>(sides: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...sides] : [...sides].reverse();
}

export type Target = { op: '>=' | '<='; value: number };

export type Verdict = 'met' | 'missed' | 'not judged' | 'no target';

export type Judged = {
  name: string;
  values: number[];
  median: number;
  min: number;
  max: number;
  pairs: number;
  target: Target | null;
  verdict: Verdict;
  /** Why a figure was not judged, or null. */
  reason: string | null;
  /** Other processes' share of the machine's CPU during the rounds (NaN: not measurable). */
  foreign_cpu: number;
};

/**
 * The verdict on one ratio's values: not judged when another process took more than `maxForeign`
 * of the machine (or that is unknown, unless the check is off: `maxForeign` ≥ 1), or fewer than
 * `minPairs` rounds gave a value; else met or missed on the median.
 */
/** Why figures measured under `foreignShare` of background load may not be judged (null: they may). */
export function loadRefusal(foreignShare: number, maxForeign: number): string | null {
  if (maxForeign >= 1) return null;
  if (!Number.isFinite(foreignShare)) return 'background load not measurable';
  if (foreignShare > maxForeign) return `background load ${fmt(foreignShare * 100, 0)}% (> ${fmt(maxForeign * 100, 0)}%)`;
  return null;
}

export function judge(name: string, values: readonly number[], target: Target | undefined, foreignShare: number, opts: { maxForeign: number; minPairs: number }): Judged {
  const s = summarize(values);
  const base = { name, values: [...values], median: s.median, min: s.min, max: s.max, pairs: s.n, target: target ?? null, foreign_cpu: foreignShare };
  let reason = loadRefusal(foreignShare, opts.maxForeign);
  if (!reason && s.n < opts.minPairs) reason = `${s.n} valid pairs (< ${opts.minPairs})`;
  if (!target) return { ...base, verdict: reason ? 'not judged' : 'no target', reason };
  if (reason) return { ...base, verdict: 'not judged', reason };
  const met = target.op === '>=' ? s.median >= target.value : s.median <= target.value;
  return { ...base, verdict: met ? 'met' : 'missed', reason: null };
}

/** "0.83 (0.79–0.88, 5 pairs)". */
export function formatFigure(j: Pick<Judged, 'median' | 'min' | 'max' | 'pairs'>, digits = 2): string {
  return `${fmt(j.median, digits)} (${fmt(j.min, digits)}–${fmt(j.max, digits)}, ${j.pairs} pairs)`;
}

/** "≥ 0.9 met" / "≥ 0.9 MISSED" / "≥ 0.9 not judged: background load 43% (> 15%)" / "". */
export function formatVerdict(j: Pick<Judged, 'target' | 'verdict' | 'reason'>): string {
  const t = j.target ? `${j.target.op === '>=' ? '≥' : '≤'} ${j.target.value} ` : '';
  if (j.verdict === 'not judged') return `${t}not judged: ${j.reason ?? ''}`;
  if (j.verdict === 'met') return `${t}met`;
  if (j.verdict === 'missed') return `${t}MISSED`;
  return '';
}

/**
 * CPU seconds of the bench's own processes, accumulated over samples (`pid → CPU seconds` of each
 * process counted as the bench's). A process present in the previous sample adds what it used
 * since; one first seen after the first sample (started meanwhile) adds all it used; one whose CPU
 * went down is a reused pid, a new process. Exited processes add nothing more (what they used after
 * their last sample is lost: at most one sample interval's worth).
 */
export type OwnCpu = { last: Map<number, number> | undefined; total: number };
export function accumulateOwn(state: OwnCpu, sample: ReadonlyMap<number, number>): OwnCpu {
  let total = state.total;
  if (state.last) {
    for (const [pid, cpu] of sample) {
      const before = state.last.get(pid);
      total += before === undefined || cpu < before ? cpu : cpu - before;
    }
  }
  return { last: new Map(sample), total };
}

/** Other processes' share of the machine: (machine busy − own) ÷ (seconds × cores), at least 0. */
export function foreignShare(o: { busySeconds: number; ownSeconds: number; wallSeconds: number; cores: number }): number {
  if (!(o.wallSeconds > 0) || !(o.cores > 0) || !Number.isFinite(o.busySeconds) || !Number.isFinite(o.ownSeconds)) return NaN;
  return Math.max(0, (o.busySeconds - o.ownSeconds) / (o.wallSeconds * o.cores));
}

// ---------------------------------------------------------------------------------------------
// The load meter (/proc).
// ---------------------------------------------------------------------------------------------
/** `pid → CPU seconds` of this process, its descendants, and the PostgreSQL backends of `databases` (empty off Linux). */
export function ownProcesses(databases: readonly string[]): Map<number, number> {
  const out = new Map<number, number>();
  const procs = new Map<number, { ppid: number; cpu: number }>();
  for (const pid of procPids()) {
    const stat = procStat(pid);
    if (stat) procs.set(pid, stat);
  }
  const mine = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
      if (p === process.pid) return true;
      p = procs.get(p)?.ppid ?? 0;
    }
    return false;
  };
  for (const [pid, p] of procs) {
    if (mine(pid)) {
      out.set(pid, p.cpu);
      continue;
    }
    if (!databases.length) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.startsWith('postgres: ') && databases.some((db) => cmd.includes(` ${db} `))) out.set(pid, p.cpu);
    } catch { /* gone, or not ours to read */ }
  }
  return out;
}

export type LoadFigures = {
  seconds: number;
  cores: number;
  /** Share of the machine's CPU (all cores) used: by anything, by this bench, by other processes. */
  machine_busy: number;
  own: number;
  foreign: number;
  /** The 1-minute load average at the end. */
  loadavg_1m: number;
};

export type LoadMeter = {
  /** Starts a window; `end()` answers the figures since. */
  window(): { end(): LoadFigures };
  stop(): void;
};

/** Samples the machine every BENCH_LOAD_SAMPLE_MS (1000) until `stop()`; `databases`: the bench's own databases (their backends count as the bench's). */
export function createLoadMeter(databases: readonly string[] = []): LoadMeter {
  const cores = os.availableParallelism();
  let own: OwnCpu = { last: undefined, total: 0 };
  const sample = () => { own = accumulateOwn(own, ownProcesses(databases)); };
  sample();
  const timer = setInterval(sample, envNumber('BENCH_LOAD_SAMPLE_MS', 1000, 100));
  timer.unref();
  const mark = () => { sample(); return { t: performance.now(), busy: machineBusySeconds(), own: own.total }; };
  return {
    window() {
      const from = mark();
      return {
        end() {
          const to = mark();
          const wallSeconds = (to.t - from.t) / 1000;
          const busySeconds = to.busy - from.busy;
          const ownSeconds = to.own - from.own;
          return {
            seconds: wallSeconds, cores,
            machine_busy: busySeconds / (wallSeconds * cores),
            own: ownSeconds / (wallSeconds * cores),
            foreign: foreignShare({ busySeconds, ownSeconds, wallSeconds, cores }),
            loadavg_1m: os.loadavg()[0]!,
          };
        },
      };
    },
    stop: () => clearInterval(timer),
  };
}

export function formatLoad(l: LoadFigures): string {
  return `background load ${fmt(l.foreign * 100, 0)}% of ${l.cores} cores (this bench ${fmt(l.own * 100, 0)}%, machine busy ${fmt(l.machine_busy * 100, 0)}%, load average ${fmt(l.loadavg_1m, 1)}) over ${fmt(l.seconds, 0)} s`;
}

// ---------------------------------------------------------------------------------------------
// Interleaved rounds.
// ---------------------------------------------------------------------------------------------

/** Rounds per judged ratio (BENCH_PAIRS, 5), and the judging limits. */
export const pairSettings = () => ({
  rounds: envNumber('BENCH_PAIRS', 5, 1, true),
  maxForeign: envNumber('BENCH_MAX_FOREIGN_CPU', 0.15, 0),
  minPairs: envNumber('BENCH_MIN_PAIRS', 5, 1, true),
});

export type Side<R> = { name: string; run(round: number): Promise<R> };

export type RatioSpec<R> = {
  name: string;
  /** Side names. */
  numerator: string;
  denominator: string;
  /** The ratio of one round (default: `rate(numerator) ÷ rate(denominator)`). */
  value?: (numerator: R, denominator: R) => number;
  target?: Target;
};

export type Interleaved<R> = {
  /** Each side's results, by round. */
  results: Record<string, R[]>;
  ratios: Judged[];
  load: LoadFigures;
  rounds: number;
};

/**
 * Runs every side once per round (order alternating per round), `rounds` times, with the load
 * meter's window over all of it, then judges each ratio on its per-round values.
 */
export async function interleave<R>(o: {
  sides: Side<R>[];
  ratios: RatioSpec<R>[];
  meter: LoadMeter;
  rate?: (r: R) => number;
  rounds?: number;
  log?: (msg: string) => void;
  /** Runs after each side's run (e.g. a pause, a check that the servers are alive). */
  after?: (side: string, result: R, round: number) => Promise<void>;
  /**
   * `alternate` (default): reversed every other round. `fixed`: the given order every round, for a
   * side whose work outlasts its run (voice: calls end seconds after they are placed, so the
   * baseline goes first) when each side writes its own tables (their sizes still grow alike).
   */
  order?: 'alternate' | 'fixed';
}): Promise<Interleaved<R>> {
  const settings = pairSettings();
  const rounds = o.rounds ?? settings.rounds;
  const rate = o.rate ?? ((r: R) => (r as { rps?: number; rate?: number }).rps ?? (r as { rate?: number }).rate ?? NaN);
  const results: Record<string, R[]> = Object.fromEntries(o.sides.map((s) => [s.name, []]));
  const window = o.meter.window();
  for (let round = 0; round < rounds; round++) {
    for (const side of o.order === 'fixed' ? o.sides : roundOrder(o.sides, round)) {
      const r = await side.run(round);
      results[side.name]!.push(r);
      o.log?.(`round ${round + 1}/${rounds} ${side.name}: ${fmt(rate(r), 1)}/s`);
      await o.after?.(side.name, r, round);
    }
  }
  const load = window.end();
  const ratios = o.ratios.map((spec) => {
    const value = spec.value ?? ((n: R, d: R) => rate(n) / rate(d));
    const values = Array.from({ length: rounds }, (_, i) => value(results[spec.numerator]![i]!, results[spec.denominator]![i]!));
    return judge(spec.name, values, spec.target, load.foreign, settings);
  });
  o.log?.(formatLoad(load));
  return { results, ratios, load, rounds };
}

/** Table rows for judged ratios: name, median (min–max, pairs), target and verdict. */
export function judgedRows(js: readonly Judged[], digits = 2): string[][] {
  return [['ratio (per round, interleaved)', 'median (min–max, pairs)', 'target / verdict'], ...js.map((j) => [j.name, formatFigure(j, digits), formatVerdict(j)])];
}
