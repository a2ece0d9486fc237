/**
 * API sends share their sender's 10DLC pace with campaigns (platform/pacing.ts): an SMS from a
 * number with an approved registration (compliance's `senderThroughput` port) takes one slot of
 * that number's GCRA schedule when its delivery runs; a slot in the future moves the delivery's row
 * of the delivery queue to that moment (reserved and moved in one transaction; the paced delivery
 * sends without asking again). Campaign messages are paced by their campaign's batches (`metadata.campaign_id`)
 * and not asked twice. Senders without a registration, and other channels, are not paced.
 * Throughputs are cached for a few seconds per sender.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Clock } from '../../platform/clock.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Transaction } from 'kysely';
import { stableJobId } from '../../platform/jobs/jobIds.ts';
import { pacingKey, reserveSlots } from '../../platform/pacing.ts';
import type { SenderThroughputPort } from '../compliance/compliance.ports.ts';
import { DELIVER_JOB } from './messaging.model.ts';
import type { DeliveryQueue } from './messaging.queue.ts';

const CACHE_MS = 5000;

/** The id of a message's delivery job moved to its pacing slot (before the delivery queue). */
export const pacedJobId = (messageId: string): string => stableJobId(DELIVER_JOB, messageId, 'paced');
/** The id of a message's delivery job before the delivery queue (pg-boss job ids are UUIDs: one derived from the message id). */
export function uuidFromMessageId(id: string): string {
  const hex = Buffer.from(id).toString('hex').padEnd(32, '0').slice(-32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** Every delivery job a message could have before the delivery queue: the one of its acceptance and, when paced, the one of its slot. */
export const deliveryJobIds = (messageId: string): string[] => [uuidFromMessageId(messageId), pacedJobId(messageId)];
/** A slot starting within this much of now is taken at once. */
const NOW_MS = 5;

type Deps = { orm: MikroORM; clock: Clock; queue: Pick<DeliveryQueue, 'deferWithin'>; throughput: () => SenderThroughputPort | undefined };

export class SendPacing {
  readonly #d: Deps;
  readonly #rates = new Map<string, { rate: number | null; at: number }>();

  constructor(deps: Deps) {
    this.#d = deps;
  }

  async #rate(scope: Scope, from: string): Promise<number | null> {
    const port = this.#d.throughput();
    if (!port) return null;
    const key = pacingKey(scope, 'sms', from);
    const now = Date.now();
    const hit = this.#rates.get(key);
    if (hit && now - hit.at < CACHE_MS) return hit.rate;
    const rate = await port.throughputOf(scope, from);
    if (this.#rates.size > 10_000) this.#rates.clear();
    this.#rates.set(key, { rate, at: now });
    return rate;
  }

  /** Whether the message's delivery was moved to a later slot of its sender's pace (its queue row due then). */
  async deferred(scope: Scope, message: { id: string; channel: string; from: string | null; metadata: Record<string, unknown> | null }): Promise<boolean> {
    if (message.channel !== 'sms' || !message.from || message.metadata?.campaign_id !== undefined) return false;
    const rate = await this.#rate(scope, message.from);
    if (!rate) return false;
    const now = this.#d.clock.now();
    return tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const slot = await reserveSlots(tx, pacingKey(scope, 'sms', message.from), 1, rate, now);
      if (slot.start.getTime() <= now.getTime() + NOW_MS) return false;
      await this.#d.queue.deferWithin(tx.getTransactionContext<Transaction<unknown>>()!, scope, message.id, slot.start);
      return true;
    });
  }
}
