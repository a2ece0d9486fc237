import { describe, expect, it } from 'vitest';
import { Slots } from './slots.ts';

describe('Slots', () => {
  it('runs at most `size` tasks at once, the rest in order, and frees a slot when a task fails', async () => {
    const slots = new Slots(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const gates = Array.from({ length: 5 }, () => Promise.withResolvers<void>());
    const tasks = gates.map((g, i) => slots.run(async () => {
      running++;
      most = Math.max(most, running);
      order.push(i);
      await g.promise;
      running--;
      if (i === 1) throw new Error('task 1 failed');
      return i;
    }));
    await Promise.resolve();
    expect(order).toEqual([0, 1]);
    gates[1]!.resolve();
    await expect(tasks[1]).rejects.toThrow('task 1 failed');
    expect(order).toEqual([0, 1, 2]);
    for (const g of gates) g.resolve();
    expect(await Promise.all([tasks[0], tasks[2], tasks[3], tasks[4]])).toEqual([0, 2, 3, 4]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });
});
