/**
 * The reads a new call starts from: the consent of the number dialled (contacts', through the
 * call-consent port) and the organization's voice numbers (numbers'). When both owners offer their
 * read as a part, the two run as one statement per batch (platform/db/pairedReads.ts); otherwise
 * as two reads side by side.
 */
import type { Pool } from 'pg';
import { PairedReads, partRowsJson, settled, type PartRow, type Rider } from '../../../platform/db/pairedReads.ts';
import type { InsertGate } from '../../../platform/db/groupInsert.ts';
import { genericArrays } from '../../../platform/db/plans.ts';
import { arrayLiteral } from '../../../platform/db/rowsets.ts';
import type { AdmissionTake } from '../../../platform/operations.ts';
import type { CounterTake, CounterTaken } from '../../../platform/ratelimit/limiter.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { ServiceError } from '../../../platform/errors.ts';
import type { CallConsentPort, VoiceNumbersPort } from '../voice.ports.ts';

/** What a new call's lookups read (settled: CallPlacing.create raises the errors in order). */
export type CallLookups = { consent: PromiseSettledResult<void>; numbers: PromiseSettledResult<string[]> };

/**
 * A new call that its lookups' statement writes when they allow it (CallLookupReads.gate): the
 * tenant, `to` (its consent), `from` (held by the tenant), and the request's rate-limit admission
 * (none: admitted already, as a GraphQL request is before it runs).
 */
export type GatedCall = { tenant: TenantRef; to: string; from: string; admission: AdmissionTake | undefined };

/** The gate's answer: whether the call was written, and the lookups it read either way. */
export type GatedAnswer = { written: boolean; lookups: CallLookups };

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
      return { consent, numbers: held(numbers) };
    }
    const [consent, numbers] = await Promise.allSettled([this.assertMayCall(scope, to), this.voiceNumbers(scope, 'from')]);
    return { consent, numbers };
  }

  /**
   * The lookups as the gate of the calls' group insert (platform/db/groupInsert.ts): one statement
   * reads them for a batch of new calls, takes the rate-limit slots of those whose take is still
   * queued (the rider), and writes each call whose take admitted it (or that was admitted already),
   * whose `from` the tenant holds and whose `to` did not opt out. So a POST that fits is one round
   * trip. A call it does not write gets the lookups (CallPlacing.create raises their errors in
   * order, or writes it once admitted). Null when an owner offers no condition for its read
   * (`heldSql`, `refusedSql`): then there is no gate.
   */
  gate<I>(pick: (item: I) => GatedCall): InsertGate<I, GatedAnswer> | null {
    const consent = this.#consent()?.callConsentRead;
    const numbers = this.#numbers.voiceNumbersRead;
    if (!consent || !numbers) return null;
    const rider = this.#takes;
    const takeParams = rider ? rider.part.params : 0;
    return {
      params: consent.params + numbers.params + takeParams + 5,
      ctes: (first) => {
        let p = first + consent.params + numbers.params;
        const takes = rider ? rider.part.sql(p) : 'select null::integer as idx, null::integer as first_count, null::integer as second_count where false';
        p += takeParams;
        const arrays = genericArrays([`$${p}::text[]`, `$${p + 1}::text[]`, `$${p + 2}::text[]`, `$${p + 3}::integer[]`, `$${p + 4}::boolean[]`]);
        return [
          { name: 'consent', sql: consent.sql(first) },
          { name: 'numbers', sql: numbers.sql(first + consent.params) },
          { name: 'takes', sql: takes },
          { name: 'placed', sql: `select * from unnest(${arrays}) with ordinality as t(org, mode, caller, take, admitted, i)` },
          {
            name: 'gate',
            sql: `select c.i from placed c
              where (c.admitted or exists (select 1 from takes r where r.idx = c.take and r.first_count is not null and r.second_count is not null))
                and ${numbers.heldSql('numbers', 'c.org', 'c.mode', 'c.caller')}
                and not ${consent.refusedSql('consent', 'c.i')}`,
          },
        ];
      },
      follow: (groupComing) => rider?.follow(groupComing),
      select: `${partRowsJson('select * from consent')} as a, ${partRowsJson('select * from numbers')} as b, ${partRowsJson('select * from takes')} as r`,
      batch: (items) => {
        // Taken first, before anything is awaited: the takes' batcher left its queue to this batch.
        const riding = rider?.handOver();
        const calls = items.map(pick);
        const takeOf = new Map<object, number>(riding?.items.map((take, n) => [take, n + 1]) ?? []);
        const consentItems = calls.map((c) => ({ tenant: c.tenant, recipient: c.to }));
        const tenants = calls.map((c) => c.tenant);
        const values = [
          ...consent.values(consentItems), ...numbers.values(tenants), ...(rider ? rider.part.values(riding?.items ?? []) : []),
          arrayLiteral(calls.map((c) => c.tenant.organizationId)), arrayLiteral(calls.map((c) => c.tenant.mode)), arrayLiteral(calls.map((c) => c.from)),
          arrayLiteral(calls.map((c) => (c.admission?.take ? takeOf.get(c.admission.take) ?? null : null))),
          arrayLiteral(calls.map((c) => (c.admission === undefined || c.admission.outcome() === 'admitted' ? 't' : 'f'))),
        ];
        return {
          values,
          answers: (row, written) => {
            if (riding) {
              try {
                riding.settle(rider!.part.answers((row.r as PartRow[] | undefined) ?? [], riding.items));
              } catch (e) {
                riding.fail(e);
              }
            }
            const a = consent.answers((row.a as PartRow[] | undefined) ?? [], consentItems);
            const b = numbers.answers((row.b as PartRow[] | undefined) ?? [], tenants);
            return calls.map((_, n) => ({ written: written.has(n + 1), lookups: { consent: settled<void>(a[n] as void | Error), numbers: held(settled(b[n]!)) } }));
          },
          // Nothing of the statement is stored: the takes go out in their own batcher's next statement.
          failed: () => riding?.putBack(),
        };
      },
    };
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

/** The numbers read, an empty list refused with SENDER_NOT_CONFIGURED. */
function held(numbers: PromiseSettledResult<string[]>): PromiseSettledResult<string[]> {
  return numbers.status === 'fulfilled' && numbers.value.length === 0 ? { status: 'rejected', reason: noVoiceNumbers('from') } : numbers;
}

function noVoiceNumbers(field: string): ServiceError {
  return new ServiceError('SENDER_NOT_CONFIGURED', 'The account has no voice-capable phone number; buy one with POST /v1/numbers', { field, channel: 'voice' });
}
