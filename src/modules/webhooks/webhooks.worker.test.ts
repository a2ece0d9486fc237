import { describe, expect, it } from 'vitest';
import type { Logger } from '../../platform/logger.ts';
import type { ClaimedDelivery, WebhookDeliveryEngine } from './webhooks.delivery.ts';
import type { WebhookFanOut } from './webhooks.fanout.ts';
import { WebhookWorker } from './webhooks.worker.ts';

const delivery = (id: string): ClaimedDelivery => ({
  id, tenant: { organizationId: 'org_1', mode: 'test' }, endpointId: null, url: 'https://example.test/hook', payload: '{}', attempt: 0, endpoint: null, traceParent: null,
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A worker over a fake engine: counts claim statements; attempts stay in flight until released. */
function worker(concurrency: number) {
  const claims: number[] = [];
  const pending: (() => void)[] = [];
  const deliveries = {
    claimDue: async (limit: number) => {
      claims.push(limit);
      return [];
    },
    deliver: () => new Promise<void>((r) => pending.push(r)),
    closeConnections: () => {},
  } as unknown as WebhookDeliveryEngine;
  const fanOut = { attachLocalWorker: () => {}, detachLocalWorker: () => {} } as unknown as WebhookFanOut;
  const log = { warn: () => {}, error: () => {} } as unknown as Logger;
  const w = new WebhookWorker({ deliveries, fanOut, log, intervalMs: 60_000, concurrency });
  w.start();
  return { w, claims, finish: () => pending.splice(0).forEach((r) => r()) };
}

describe('WebhookWorker after a relay batch', () => {
  it('sends no claim when the fan-out handed every fresh delivery over claimed (or had none)', async () => {
    const { w, claims, finish } = worker(4);
    // A batch of events nobody subscribed to: no deliveries, nothing reserved.
    w.dispatched();
    // A batch whose two deliveries fit the free slots: inserted claimed and handed over.
    expect(w.reserve(2)).toBe(2);
    w.run([delivery('dlv_1'), delivery('dlv_2')]);
    w.dispatched();
    await sleep(5);
    expect(claims).toEqual([]);
    finish();
    await w.stop();
  });

  it('claims once after a batch whose fan-out left deliveries in the table', async () => {
    const { w, claims, finish } = worker(2);
    // Three fresh deliveries, two slots: one waits in the table.
    expect(w.reserve(3)).toBe(2);
    w.run([delivery('dlv_1'), delivery('dlv_2')]);
    finish();
    await sleep(5);
    claims.length = 0;
    w.dispatched();
    await sleep(5);
    expect(claims).toEqual([2]);
    // Told again without new leftovers: nothing more to claim.
    w.dispatched();
    await sleep(5);
    expect(claims).toEqual([2]);
    await w.stop();
  });
});
