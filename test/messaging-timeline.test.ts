/**
 * The sandbox's report timeline (messaging.timeline.ts) on its own, against the real database: the
 * reports an instance schedules while its ticker runs are stored already claimed for it (attempts
 * 1, due only after the delay and a lease) and applied from memory when due, without a claim
 * statement; a report applied before its send was recorded is tried again from memory, its row
 * still claimed; without a running ticker the rows are stored due for any instance. The target
 * here records the reports instead of MessageDelivery (messaging-delivery.test.ts covers the rest
 * end to end).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/platform/logger.ts';
import { SandboxReportTimeline, type ReportTarget } from '../src/modules/messaging/messaging.timeline.ts';
import { ReportTooEarly } from '../src/modules/messaging/messaging.delivery.ts';
import type { StatusReport } from '../src/providers/messaging/types.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
const timelines: SandboxReportTimeline[] = [];
beforeAll(async () => { t = await startTestApp({ workers: false }); });
afterEach(async () => {
  await Promise.all(timelines.splice(0).map((q) => q.stop()));
  await t.db.query(`delete from messaging_sandbox_reports where message_id like 'msg_timeline_test_%'`);
});
afterAll(async () => { await t?.close(); });

const log = createLogger('silent');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const messageId = () => `msg_timeline_test_${process.pid}_${++n}`;
const report = (id: string) => ({ messageId: id, providerMessageId: `sbx_${id}`, status: 'delivered' as const });

function timeline(target: ReportTarget, start = true): SandboxReportTimeline {
  const tl = new SandboxReportTimeline({ pool: t.db, log, now: () => new Date(), tickMs: 50 });
  tl.bind(target);
  timelines.push(tl);
  if (start) tl.start();
  return tl;
}

const rowOf = async (id: string) => (await t.db.query<{ attempts: number; due_in_ms: number }>(
  `select attempts, (extract(epoch from due_at - now()) * 1000)::float8 as due_in_ms from messaging_sandbox_reports where message_id = $1`, [id])).rows[0];

describe('the sandbox report timeline', () => {
  it("stores a running ticker's reports claimed for it and applies them from memory when due, then deletes them", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const applied: { id: string; at: number }[] = [];
    const tl = timeline({ applyStatusReport: async (r: StatusReport) => { applied.push({ id: r.messageId!, at: Date.now() }); await held; return true; } });
    const id = messageId();
    const scheduled = Date.now();
    await tl.schedule(report(id), 300);
    // Claimed for this instance: no ticker claims it from the table before the delay and the lease.
    const row = await rowOf(id);
    expect(row?.attempts).toBe(1);
    expect(row!.due_in_ms).toBeGreaterThan(10_000);
    await eventually('the report to be applied', () => (applied.length === 1 ? true : undefined));
    expect(applied[0]!.at - scheduled).toBeGreaterThanOrEqual(290);
    expect((await rowOf(id))?.attempts).toBe(1);
    release();
    await eventually('the applied row to be deleted', async () => (!(await rowOf(id)) ? true : undefined));
    expect(applied).toHaveLength(1);
  });

  it('a report of its own applied before the send was recorded is applied again from memory, its row still claimed', async () => {
    let calls = 0;
    const tl = timeline({ applyStatusReport: async (r: StatusReport) => { calls++; if (calls === 1) throw new ReportTooEarly(r.messageId!); return true; } });
    const id = messageId();
    await tl.schedule(report(id), 0);
    await eventually('the second try', () => (calls === 2 ? true : undefined));
    await eventually('the applied row to be deleted', async () => (!(await rowOf(id)) ? true : undefined));
    expect(calls).toBe(2);
  });

  it('a report scheduled again (a repeated send) is stored once and applied once from memory', async () => {
    const applied: string[] = [];
    const tl = timeline({ applyStatusReport: async (r: StatusReport) => { applied.push(r.messageId!); return true; } });
    const id = messageId();
    await Promise.all([tl.schedule(report(id), 100), tl.schedule(report(id), 100)]);
    await eventually('the row to be deleted', async () => (applied.length > 0 && !(await rowOf(id)) ? true : undefined));
    await sleep(300);
    expect(applied).toEqual([id]);
  });

  it('without a running ticker the report is stored due after its delay, for any instance to claim', async () => {
    const tl = timeline({ applyStatusReport: async () => true }, false);
    const id = messageId();
    await tl.schedule(report(id), 0);
    const row = await rowOf(id);
    expect(row?.attempts).toBe(0);
    expect(row!.due_in_ms).toBeLessThanOrEqual(0);
  });
});
