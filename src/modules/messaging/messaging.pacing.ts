/**
 * API sends share their sender's 10DLC pace with campaigns (platform/pacing.ts): an SMS from a
 * number with an approved registration (compliance's `senderThroughput` port) takes one slot of
 * that number's GCRA schedule when its delivery job runs; a slot in the future puts the delivery on
 * a job for that moment (reserved and enqueued in one transaction; the paced job sends without
 * asking again). Campaign messages are paced by their campaign's batches (`metadata.campaign_id`)
 * and not asked twice. Senders without a registration, and other channels, are not paced.
 * Throughputs are cached for a few seconds per sender.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Clock } from '../../platform/clock.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { stableJobId } from '../../platform/jobs/jobIds.ts';
import { pacingKey, reserveSlots } from '../../platform/pacing.ts';
import type { SenderThroughputPort } from '../compliance/compliance.ports.ts';
import { DELIVER_JOB } from './messaging.model.ts';
import { uuidFromMessageId } from './messaging.service.ts';

const CACHE_MS = 5000;

/** The id of a message's delivery job moved to its pacing slot. */
export const pacedJobId = (messageId: string): string => stableJobId(DELIVER_JOB, messageId, 'paced');
/** Every delivery job a message can have: the one of its acceptance and, when paced, the one of its slot. */
export const deliveryJobIds = (messageId: string): string[] => [uuidFromMessageId(messageId), pacedJobId(messageId)];
/** A slot starting within this much of now is taken at once. */
const NOW_MS = 5;

type Deps = { orm: MikroORM; clock: Clock; jobs: Pick<Jobs, 'enqueue'>; throughput: () => SenderThroughputPort | undefined };

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

  /** Whether the message's delivery was moved to a later slot of its sender's pace (its job re-enqueued for it). */
  async deferred(scope: Scope, message: { id: string; channel: string; from: string | null; metadata: Record<string, unknown> | null }): Promise<boolean> {
    if (message.channel !== 'sms' || !message.from || message.metadata?.campaign_id !== undefined) return false;
    const rate = await this.#rate(scope, message.from);
    if (!rate) return false;
    const now = this.#d.clock.now();
    return tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const slot = await reserveSlots(tx, pacingKey(scope, 'sms', message.from), 1, rate, now);
      if (slot.start.getTime() <= now.getTime() + NOW_MS) return false;
      await this.#d.jobs.enqueue(DELIVER_JOB, { messageId: message.id, paced: true }, { scope, em: tx, startAfter: slot.start, id: pacedJobId(message.id) });
      return true;
    });
  }
}
