/**
 * The one consent service. Every change of a contact's per-channel consent goes through `apply`
 * (API preference updates and contact creation, STOP/START keywords, CSV imports; campaign links
 * later), which updates the contact's consent map, appends one history row per changed channel and
 * emits `contact.opted_out` / `contact.opted_in`, all in the caller's transaction. Every outbound
 * communication asks `assertCanContact` first.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Actor, Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type Page } from '../../platform/pagination.ts';
import type { ConsentCheck } from './consent.check.ts';
import {
  ConsentChange, Contact, type ConsentChannel, type ConsentMap, type ConsentSource, type ConsentStatus,
} from './contacts.entities.ts';
import { emitContactEvent } from './contacts.events.ts';

/** Who and what made a consent change, recorded with it in the history. */
export type ConsentOrigin = { actor?: Actor | null; requestId?: string | null; details?: Record<string, unknown> };

/** The origin of a change made by an API request: its caller and request id. */
export const originOf = (scope: Scope, details: Record<string, unknown> = {}): ConsentOrigin => ({ actor: scope.actor, requestId: scope.requestId, details });

export class ConsentService {
  readonly #orm: MikroORM;
  readonly #cursors: CursorCodec;
  readonly #check: ConsentCheck;

  constructor(deps: { orm: MikroORM; cursors: CursorCodec; check: ConsentCheck }) {
    this.#orm = deps.orm;
    this.#cursors = deps.cursors;
    this.#check = deps.check;
  }

  /**
   * The consent check: RECIPIENT_OPTED_OUT (422; `details.channel`, `contact_id`, `opted_out_at`,
   * `source`) when the contact with this address (phone, or email for `email`) opted out of this
   * channel. Addresses that are no contact may be contacted.
   *
   * Every outbound communication calls it before it stores or sends anything: messaging on its five
   * channels (its `consent` port, wired in app.ts), campaigns and flows, and **voice: a call to a
   * number (`POST /v1/voice/calls`, and any call a flow or agent places) must call
   * `assertCanContact(tenant, 'voice', to)` first** and place no call when it throws. The lookup is
   * ConsentCheck's (consent.check.ts): concurrent checks share one statement.
   */
  async assertCanContact(tenant: TenantRef, channel: ConsentChannel, recipient: string): Promise<void> {
    return this.#check.assertCanContact(tenant, channel, recipient);
  }

  /** The same check as a part of another module's statement (consent.check.ts `readPart`). */
  readPart(channel: ConsentChannel): ReturnType<ConsentCheck['readPart']> {
    return this.#check.readPart(channel);
  }

  /**
   * Applies consent changes to a contact loaded (and locked) in `tx`: channels whose status does not
   * change are skipped; each changed channel gets a history row; `contact.opted_out` /
   * `contact.opted_in` (with `channels` and `source`) are emitted, `contact.updated` for a channel
   * set back to `unknown`. Returns the changed channels.
   */
  apply(tx: EntityManager, c: Contact, changes: Partial<Record<ConsentChannel, ConsentStatus>>, source: ConsentSource, now: Date, origin: ConsentOrigin = {}): ConsentChannel[] {
    const changed: ConsentChannel[] = [];
    const consent: ConsentMap = { ...c.consent };
    for (const [channel, status] of Object.entries(changes) as [ConsentChannel, ConsentStatus][]) {
      const previous = consent[channel]?.status ?? 'unknown';
      if (previous === status) continue;
      consent[channel] = { status, updated_at: now.toISOString(), source };
      changed.push(channel);
      tx.create(ConsentChange, {
        id: newId('cns', now.getTime()), organizationId: c.organizationId, mode: c.mode, contactId: c.id, channel, status, previousStatus: previous, source,
        actorType: origin.actor?.type ?? null, actorId: origin.actor?.id ?? null, requestId: origin.requestId ?? null, details: origin.details ?? {}, createdAt: now,
      });
    }
    if (!changed.length) return changed;
    c.consent = consent;
    c.sequence += 1;
    c.updatedAt = now;
    const out = changed.filter((ch) => consent[ch]!.status === 'opted_out');
    const inn = changed.filter((ch) => consent[ch]!.status === 'opted_in');
    if (out.length) emitContactEvent(tx, c, 'contact.opted_out', now, { channels: out, source });
    if (inn.length) emitContactEvent(tx, c, 'contact.opted_in', now, { channels: inn, source });
    if (out.length + inn.length < changed.length) emitContactEvent(tx, c, 'contact.updated', now);
    return changed;
  }

  /** The contact's consent history, newest change first, optionally for one channel. */
  async history(scope: Scope, contactId: string, input: { channel?: ConsentChannel | null; cursor?: string | null; limit?: number | null }): Promise<Page<ConsentChange>> {
    validateLimit(input.limit); // before the contact lookup: a bad limit answers 400 even for an unknown contact
    const em = tenantEm(this.#orm, scope);
    if (!(await em.findOne(Contact, { id: contactId }, { fields: ['id'] }))) throw notFound('Contact', contactId);
    const filters = { contact: contactId, channel: input.channel ?? null };
    return this.#cursors.findPage(em, ConsentChange, scope, { list: 'contact_consent_history', filters }, input, { contactId, ...(filters.channel ? { channel: filters.channel } : {}) });
  }
}
