/**
 * Preloaded into the soak's service processes (`node --expose-gc --import ./bench/heap-probe.ts
 * src/main.ts`, bench/faults.ts): on SIGUSR2 the process writes one stderr line,
 * `heap-probe <json>`, with its memory as V8 and the allocator see it — `process.memoryUsage()`,
 * `v8.getHeapStatistics()` and each heap space's used / committed / physical size — then, when
 * started with `--expose-gc` and the file `$TMPDIR/heap-probe-<pid>.gc` exists (the harness writes it
 * before the signal), runs a full collection and writes a second line, `heap-probe-gc <json>`,
 * with the same figures after it. The soak's idle checkpoints read both: RSS that stays
 * after a full collection is retained objects (a leak) or native memory; RSS that a collection
 * gives back is heap V8 had not yet shrunk. The service itself knows nothing of this.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';

/** A file whose presence makes the next probe of process `pid` also collect (and report after it); bench/faults.ts writes it. */
const heapProbeGcFlag = (pid: number) => join(tmpdir(), `heap-probe-${pid}.gc`);

const mb = (n: number) => Math.round((n / 1048576) * 10) / 10;

function snapshot() {
  const m = process.memoryUsage();
  const h = v8.getHeapStatistics();
  const spaces: Record<string, { used: number; committed: number; physical: number }> = {};
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name] = { used: mb(s.space_used_size), committed: mb(s.space_size), physical: mb(s.physical_space_size) };
  return {
    rss: mb(m.rss), heap_total: mb(m.heapTotal), heap_used: mb(m.heapUsed), external: mb(m.external), array_buffers: mb(m.arrayBuffers),
    heap_physical: mb(h.total_physical_size), heap_limit: mb(h.heap_size_limit), malloced: mb(h.malloced_memory), peak_malloced: mb(h.peak_malloced_memory),
    native_contexts: h.number_of_native_contexts, detached_contexts: h.number_of_detached_contexts,
    // What RSS holds besides the JavaScript heap and external buffers: code, stacks, the allocator's arenas.
    other: mb(m.rss - h.total_physical_size - m.external),
    spaces,
  };
}

process.on('SIGUSR2', () => {
  process.stderr.write(`heap-probe ${JSON.stringify(snapshot())}\n`);
  const gc = (globalThis as { gc?: (o?: { type: 'major'; execution: 'sync' }) => void }).gc;
  if (!gc || !existsSync(heapProbeGcFlag(process.pid))) return;
  gc();
  process.stderr.write(`heap-probe-gc ${JSON.stringify(snapshot())}\n`);
});
