/**
 * Preloaded into a service by a bench (`node --import ./bench/gc-observe.ts src/main.ts`, see
 * BENCH_AGENT_GC in bench/agents.ts): every garbage collection of the process as one stderr line,
 * `gc-observe <start> <duration> <kind>`, the start in epoch milliseconds (performance.timeOrigin +
 * the entry's startTime, so a bench can line it up with its own clock) and the kind V8's flag
 * (1 minor/scavenge, 2 major, 4 incremental, 8 weak callbacks).
 */
import { PerformanceObserver, performance, type PerformanceEntry } from 'node:perf_hooks';

const origin = performance.timeOrigin;
new PerformanceObserver((list) => {
  let out = '';
  for (const e of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[]) {
    out += `gc-observe ${(origin + e.startTime).toFixed(3)} ${e.duration.toFixed(3)} ${e.detail?.kind ?? 0}\n`;
  }
  process.stderr.write(out);
}).observe({ entryTypes: ['gc'] });
