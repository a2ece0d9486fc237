/**
 * The reads a new call starts from: the consent of the number dialled (contacts', through the
 * call-consent port) and the organization's voice numbers (numbers'). When both owners offer their
 * read as a part, the two run as one statement per batch (platform/db/pairedReads.ts); otherwise
 * as two reads side by side.
 */
import type { Pool } from 'pg';
import { PairedReads, type Rider } from '../../platform/db/pairedReads.ts';
import type { CounterTake, CounterTaken } from '../../platform/ratelimit/limiter.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { CallConsentPort, VoiceNumbersPort } from './voice.ports.ts';

/** What a new call's lookups read (settled: CallsService.create raises the errors in order). */
export type CallLookups = { consent: PromiseSettledResult<void>; numbers: PromiseSettledResult<string[]> };

export class CallLookupReads {
  readonly #pool: Pool;
  readonly #numbers: VoiceNumbersPort;
  readonly #consent: () => CallConsentPort | undefined;
  /** The consent and numbers reads in one statement (#paired(); null: two reads). */
  #pairedReads: PairedReads<{ tenant: TenantRef; recipient: string }, void, TenantRef, string[], CounterTake, CounterTaken> | null | undefined;
  readonly #takes: Rider<CounterTake, CounterTaken> | undefined;

  /**
   * `takes`: the rate limiter's queued takes ride in the lookups' statement (a POST takes its
   * rate-limit slots while its lookups read: one round trip for both, not two).
   */
  constructor(deps: { pool: Pool; numbers: VoiceNumbersPort; consent: () => CallConsentPort | undefined; takes?: Rider<CounterTake, CounterTaken> }) {
    this.#pool = deps.pool;
    this.#takes = deps.takes;
    this.#numbers = deps.numbers;
    this.#consent = deps.consent;
  }

  /** RECIPIENT_OPTED_OUT (422) when the number's contact opted out of voice calls (TCPA: never dial them). */
  async assertMayCall(scope: TenantRef, to: string): Promise<void> {
    await this.#consent()?.assertCanCall(scope, to);
  }

  /** The organization's voice numbers; SENDER_NOT_CONFIGURED when it has none. */
  async voiceNumbers(scope: TenantRef, field: string): Promise<string[]> {
    const numbers = await this.#numbers.voiceNumbers(scope);
    if (!numbers.length) throw noVoiceNumbers(field);
    return numbers;
  }

  /**
   * The consent of `to` and the voice numbers, settled (they never throw here). The operation runs
   * them as its `prepare`, while the request's rate-limit admission is in flight
   * (platform/operations.ts), so a POST waits for the longer of the round trips, not their sum.
   */
  async lookups(scope: TenantRef, to: string): Promise<CallLookups> {
    const paired = this.#paired();
    if (paired) {
      const tenant = { organizationId: scope.organizationId, mode: scope.mode };
      const { a: consent, b: numbers } = await paired.read({ tenant, recipient: to }, tenant);
      return { consent, numbers: numbers.status === 'fulfilled' && numbers.value.length === 0 ? { status: 'rejected', reason: noVoiceNumbers('from') } : numbers };
    }
    const [consent, numbers] = await Promise.allSettled([this.assertMayCall(scope, to), this.voiceNumbers(scope, 'from')]);
    return { consent, numbers };
  }

  /**
   * Both reads as parts of one statement when both owners offer one; null when one does not
   * (without contacts nobody opted out: two reads as before). Made on first use: the consent port
   * is resolved late.
   */
  #paired(): PairedReads<{ tenant: TenantRef; recipient: string }, void, TenantRef, string[], CounterTake, CounterTaken> | null {
    if (this.#pairedReads !== undefined) return this.#pairedReads;
    const consent = this.#consent()?.callConsentRead;
    const numbers = this.#numbers.voiceNumbersRead;
    this.#pairedReads = consent && numbers ? new PairedReads({ pool: this.#pool, name: 'voice_call_lookups', a: consent, b: numbers, ...(this.#takes ? { rider: this.#takes } : {}) }) : null;
    return this.#pairedReads;
  }
}

function noVoiceNumbers(field: string): ServiceError {
  return new ServiceError('SENDER_NOT_CONFIGURED', 'The account has no voice-capable phone number; buy one with POST /v1/numbers', { field, channel: 'voice' });
}
