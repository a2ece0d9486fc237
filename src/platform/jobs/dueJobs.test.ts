import { describe, expect, it } from 'vitest';
import type { Logger } from '../logger.ts';
import { DueJobs, dueQueuesSql, type DueJobsBoss } from './dueJobs.ts';

const log = { warn: () => {} } as unknown as Logger;

type Worker = { id: string; name: string; count: number; options: { batchSize?: number } };

function fakeBoss(workers: Worker[], due: { name: string; n: number }[]) {
  const statements: { text: string; values: unknown[] }[] = [];
  const woken: string[] = [];
  const boss: DueJobsBoss = {
    getDb: () => ({
      executeSql: async (text: string, values?: unknown[]) => {
        statements.push({ text, values: values ?? [] });
        return { rows: due };
      },
    }),
    getWipData: () => workers,
    notifyWorker: (id: string) => { woken.push(id); },
  };
  return { boss, statements, woken };
}

describe('DueJobs', () => {
  it('asks once for every queue, and wakes only the workers of queues with due jobs', async () => {
    const { boss, statements, woken } = fakeBoss([
      { id: 'a1', name: 'a', count: 0, options: { batchSize: 1 } },
      { id: 'b1', name: 'b', count: 0, options: { batchSize: 1 } },
      { id: 'c1', name: 'c', count: 0, options: {} },
    ], [{ name: 'b', n: 1 }, { name: 'c', n: 3 }]);
    const due = new DueJobs({ boss, schema: 'pgboss', queues: ['a', 'b', 'c'], tickMs: 500, log });
    expect(await due.tick()).toBe(2);
    expect(statements).toEqual([{ text: dueQueuesSql('pgboss'), values: [['a', 'b', 'c']] }]);
    expect(woken.sort()).toEqual(['b1', 'c1']);
  });

  it('wakes as many workers as their fetches take the due jobs, idle ones first', async () => {
    const { boss, woken } = fakeBoss([
      { id: 'busy', name: 'q', count: 1, options: { batchSize: 1 } },
      { id: 'idle1', name: 'q', count: 0, options: { batchSize: 1 } },
      { id: 'idle2', name: 'q', count: 0, options: { batchSize: 1 } },
      { id: 'big1', name: 'batch', count: 0, options: { batchSize: 16 } },
      { id: 'big2', name: 'batch', count: 0, options: { batchSize: 16 } },
    ], [{ name: 'q', n: 2 }, { name: 'batch', n: 5 }]);
    await new DueJobs({ boss, schema: 'pgboss', queues: ['q', 'batch'], tickMs: 500, log }).tick();
    expect(woken).toEqual(['idle1', 'idle2', 'big1']);
  });

  it('looks again soon only when the idle workers woken could not take every due job', async () => {
    const looks: number[] = [];
    const run = async (workers: Worker[], n: number) => {
      const { boss } = fakeBoss(workers, [{ name: 'q', n }]);
      const due = new DueJobs({ boss, schema: 'pgboss', queues: ['q'], tickMs: 10_000, log });
      const tick = due.tick.bind(due);
      due.tick = async () => { looks.push(Date.now()); return tick(); };
      due.start();
      await new Promise((r) => setTimeout(r, 300));
      await due.stop();
      const count = looks.length;
      looks.length = 0;
      return count;
    };
    const idle = (id: string): Worker => ({ id, name: 'q', count: 0, options: { batchSize: 1 } });
    // 5 due, 2 idle workers: a look every BACKLOG_LOOK_MS while it lasts.
    expect(await run([idle('a'), idle('b')], 5)).toBeGreaterThanOrEqual(3);
    // 2 due, 2 idle workers: taken; the next look is the regular one.
    expect(await run([idle('a'), idle('b')], 2)).toBe(1);
    // A backlog behind busy workers: they fetch again when done; no early look.
    expect(await run([{ id: 'a', name: 'q', count: 1, options: { batchSize: 1 } }], 5)).toBe(1);
  });

  it('nothing due: nothing woken', async () => {
    const { boss, woken } = fakeBoss([{ id: 'a1', name: 'a', count: 0, options: {} }], []);
    expect(await new DueJobs({ boss, schema: 'pgboss', queues: ['a'], tickMs: 500, log }).tick()).toBe(0);
    expect(woken).toEqual([]);
  });
});
