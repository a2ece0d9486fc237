/**
 * Jobs due later (`startAfter`, a retry after its delay) are found by each instance's one look for
 * every queue (platform/jobs/dueJobs.ts), not by each worker's own poll (a 30 s backstop): such a
 * job runs within the look's interval of falling due (the smallest `pollingIntervalSeconds` of the
 * registered jobs, 0.5 s here), and once, with two instances looking.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_BACKSTOP_POLL_SECONDS, type JobRegistry } from '../src/platform/jobs/jobs.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

type Run = { key: string; attempt: number; at: number; instance: string };
const runs: Run[] = [];

const register = (instance: string) => (registry: JobRegistry) => registry.register<{ key: string; failFirst?: boolean }>({
  name: 'test.due', tenant: false, retryLimit: 2, retryDelaySeconds: 1, retryBackoff: false, pollingIntervalSeconds: 0.5,
  handler: async (ctx, data) => {
    runs.push({ key: data.key, attempt: ctx.attempt, at: Date.now(), instance });
    if (data.failFirst && ctx.attempt === 0) throw new Error('first attempt fails');
  },
});

let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp({ workers: true, registerJobs: register('a') });
  b = await startTestApp({ workers: true, sameDatabaseAs: a, registerJobs: register('b') });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const until = (cond: () => boolean, ms: number): Promise<unknown> => eventually('the job', () => cond() || undefined, ms, 10);

/** Slack for a loaded machine on top of the look's interval (a fetch, a handler start). */
const SLACK_MS = 1000;

describe('jobs due later', () => {
  it('every instance looks at the smallest interval of its jobs; workers poll only as a backstop', () => {
    expect(a.app.jobs.dueTickMs).toBe(500);
    expect(b.app.jobs.dueTickMs).toBe(500);
    expect(WORKER_BACKSTOP_POLL_SECONDS * 1000).toBeGreaterThan(10 * (500 + SLACK_MS));
  });

  it('a job scheduled for later runs within the look interval of falling due', async () => {
    const at = Date.now() + 1500;
    await a.app.jobs.enqueue('test.due', { key: 'later' }, { startAfter: new Date(at) });
    await until(() => runs.some((r) => r.key === 'later'), 10_000);
    const ran = runs.find((r) => r.key === 'later')!;
    expect(ran.at).toBeGreaterThanOrEqual(at - 50);
    expect(ran.at - at).toBeLessThan(500 + SLACK_MS);
  });

  it('a failed job is retried within the look interval of its retry delay', async () => {
    await a.app.jobs.enqueue('test.due', { key: 'retried', failFirst: true });
    await until(() => runs.filter((r) => r.key === 'retried').length >= 2, 10_000);
    const [first, second] = runs.filter((r) => r.key === 'retried');
    expect([first!.attempt, second!.attempt]).toEqual([0, 1]);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000 - 50);
    expect(second!.at - first!.at - 1000).toBeLessThan(500 + SLACK_MS);
  });

  it('jobs falling due together run once each, across two looking instances', async () => {
    const at = Date.now() + 1000;
    const keys = Array.from({ length: 30 }, (_, i) => `many-${i}`);
    await Promise.all(keys.map((key) => a.app.jobs.enqueue('test.due', { key }, { startAfter: new Date(at) })));
    await until(() => keys.every((k) => runs.some((r) => r.key === k)), 15_000);
    // Nothing runs twice, even after a further look.
    await new Promise((r) => setTimeout(r, 1200));
    const ran = runs.filter((r) => r.key.startsWith('many-'));
    expect(ran).toHaveLength(30);
    expect(new Set(ran.map((r) => r.key)).size).toBe(30);
    const latest = ran.reduce((m, r) => Math.max(m, r.at), 0);
    expect(latest - at).toBeLessThan(500 + 2 * SLACK_MS);
  });
});
