/**
 * The opt-out check every send makes (messaging now; voice, campaigns and flows later; callers go
 * through ConsentService.assertCanContact in consent.ts), batched across concurrent requests: the
 * recipients of many sends are looked up in one statement on the contacts' phone and email indexes (platform/db/batcher.ts). It reads committed consent, so an
 * opt-out committed before the send started is always honoured.
 */
import type { Pool } from 'pg';
import { ServiceError } from '../../platform/errors.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { genericArrays } from '../../platform/db/plans.ts';
import type { ReadPart } from '../../platform/db/pairedReads.ts';
import type { ConsentChannel, ConsentMap } from './contacts.entities.ts';

/**
 * The batch's lookup over parameters `$first` … `$first + 3` (organizations, modes, phones,
 * emails), one row per query (`idx`, from 1). Its arrays are read through sub-selects
 * (`genericArrays`, platform/db/plans.ts) so that PostgreSQL settles on one generic plan instead of
 * planning every execution.
 */
export function consentCheckSql(first: number): string {
  const [org, mode, phone, email] = [0, 1, 2, 3].map((i) => `$${first + i}::text[]`);
  return `select r.idx, c.id, c.consent
             from unnest(${genericArrays([org!, mode!, phone!, email!])}) with ordinality as r(org, mode, phone, email, idx)
             left join lateral (
               select id, consent from contacts x
               where x.organization_id = r.org and x.mode = r.mode and (x.phone = r.phone or x.email = r.email)
               limit 1
             ) c on true`;
}

/** The lookup as a statement of its own, a named statement. Exported for test/prepared-plans.test.ts. */
export const CONSENT_CHECK_SQL = consentCheckSql(1);

type Query = { tenant: TenantRef; channel: ConsentChannel; address: string };
type Found = { contactId: string; consent: ConsentMap } | null;

export class ConsentCheck {
  readonly #pool: Pool;
  readonly #batcher: Batcher<Query, Found>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#batcher = new Batcher((queries) => this.#run(queries), { maxInFlight: 1 });
  }

  /** Throws RECIPIENT_OPTED_OUT when the contact with this address opted out of the channel. */
  async assertCanContact(tenant: TenantRef, channel: ConsentChannel, recipient: string): Promise<void> {
    const query = consentQuery(tenant, channel, recipient);
    const refused = verdict(query, recipient, await this.#batcher.submit(query));
    if (refused) throw refused;
  }

  /**
   * The same check as a part of another module's statement (platform/db/pairedReads.ts): each
   * item's answer is RECIPIENT_OPTED_OUT or nothing. Voice places calls with it (`callConsentRead`).
   * `refusedSql` is the same verdict in SQL over the part's rows, for a statement that writes only
   * what it does not refuse.
   */
  readPart(channel: ConsentChannel): ReadPart<{ tenant: TenantRef; recipient: string }, void> & { refusedSql(rows: string, item: string): string } {
    return {
      refusedSql: (rows, item) => `exists (select 1 from ${rows} v where v.idx = ${item} and v.id is not null and v.consent -> '${channel}' ->> 'status' = 'opted_out')`,
      params: 4,
      sql: consentCheckSql,
      values: (items) => consentValues(items.map((i) => consentQuery(i.tenant, channel, i.recipient))),
      answers: (rows, items) => {
        const found = foundByIdx(rows.map((r) => ({ idx: r.idx as number | string, id: (r.id as string | null) ?? null, consent: (r.consent as ConsentMap | null) ?? null })), items.length);
        return items.map((item, i) => verdict(consentQuery(item.tenant, channel, item.recipient), item.recipient, found[i]!));
      },
    };
  }

  async #run(queries: Query[]): Promise<Found[]> {
    const { rows } = await this.#pool.query<{ idx: string; id: string | null; consent: ConsentMap | null }>({
      name: 'contacts_consent_check',
      text: CONSENT_CHECK_SQL,
      values: consentValues(queries),
    });
    return foundByIdx(rows, queries.length);
  }
}

function consentQuery(tenant: TenantRef, channel: ConsentChannel, recipient: string): Query {
  const byEmail = channel === 'email';
  return { tenant, channel, address: byEmail ? recipient.trim().toLowerCase() : (normalizePhone(recipient) ?? recipient) };
}

function consentValues(queries: readonly Query[]): unknown[] {
  return [
    queries.map((q) => q.tenant.organizationId), queries.map((q) => q.tenant.mode),
    queries.map((q) => (q.channel === 'email' ? null : q.address)), queries.map((q) => (q.channel === 'email' ? q.address : null)),
  ];
}

/** Each query's contact (its consent), from the rows by `idx` (1-based). */
function foundByIdx(rows: readonly { idx: number | string; id: string | null; consent: ConsentMap | null }[], count: number): Found[] {
  const byIdx = new Map(rows.map((r) => [Number(r.idx), r]));
  return Array.from({ length: count }, (_, i) => {
    const r = byIdx.get(i + 1);
    return r?.id ? { contactId: r.id, consent: r.consent ?? {} } : null;
  });
}

/** RECIPIENT_OPTED_OUT when the contact found opted out of the query's channel, else undefined. */
function verdict(query: Query, recipient: string, found: Found): ServiceError | undefined {
  const { channel, address } = query;
  const consent = found?.consent[channel];
  if (!found || consent?.status !== 'opted_out') return undefined;
  return new ServiceError('RECIPIENT_OPTED_OUT', `${recipient} has opted out of ${channel === 'voice' ? 'voice calls' : `${channel} messages`}; do not retry`, {
    field: 'to', channel, recipient: address, contact_id: found.contactId, opted_out_at: consent.updated_at, source: consent.source,
  });
}
