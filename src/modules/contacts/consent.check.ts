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
import type { ConsentChannel, ConsentMap } from './contacts.entities.ts';

/**
 * The batch's lookup, a named statement. Its arrays are read through sub-selects (`genericArrays`,
 * platform/db/plans.ts) so that PostgreSQL settles on one generic plan instead of planning every
 * execution. Exported for test/prepared-plans.test.ts.
 */
export const CONSENT_CHECK_SQL = `select r.idx, c.id, c.consent
             from unnest(${genericArrays(['$1::text[]', '$2::text[]', '$3::text[]', '$4::text[]'])}) with ordinality as r(org, mode, phone, email, idx)
             left join lateral (
               select id, consent from contacts x
               where x.organization_id = r.org and x.mode = r.mode and (x.phone = r.phone or x.email = r.email)
               limit 1
             ) c on true`;

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
    const byEmail = channel === 'email';
    const address = byEmail ? recipient.trim().toLowerCase() : (normalizePhone(recipient) ?? recipient);
    const found = await this.#batcher.submit({ tenant, channel, address });
    const consent = found?.consent[channel];
    if (found && consent?.status === 'opted_out') {
      throw new ServiceError('RECIPIENT_OPTED_OUT', `${recipient} has opted out of ${channel === 'voice' ? 'voice calls' : `${channel} messages`}; do not retry`, {
        field: 'to', channel, recipient: address, contact_id: found.contactId, opted_out_at: consent.updated_at, source: consent.source,
      });
    }
  }

  async #run(queries: Query[]): Promise<Found[]> {
    const { rows } = await this.#pool.query<{ idx: string; id: string | null; consent: ConsentMap | null }>({
      name: 'contacts_consent_check',
      text: CONSENT_CHECK_SQL,
      values: [
        queries.map((q) => q.tenant.organizationId), queries.map((q) => q.tenant.mode),
        queries.map((q) => (q.channel === 'email' ? null : q.address)), queries.map((q) => (q.channel === 'email' ? q.address : null)),
      ],
    });
    const byIdx = new Map(rows.map((r) => [Number(r.idx), r]));
    return queries.map((_, i) => {
      const r = byIdx.get(i + 1);
      return r?.id ? { contactId: r.id, consent: r.consent ?? {} } : null;
    });
  }
}
