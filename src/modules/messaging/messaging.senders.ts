/**
 * The organization's senders (phone numbers, email addresses, RCS agents, Viber senders): which
 * address a send goes out from, the senders API, and the numbers context's hooks that register an
 * owned number as a sender.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { listConfigured } from '../../platform/configured.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { normalizePhone, isEmail } from '../../platform/recipients.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import type { Transaction } from 'kysely';
import { prepared, sqlQuery } from '../../platform/db/sql.ts';
import { SENDER_LOOKUP_SQL, SenderLookup } from './messaging.batching.ts';
import { MessageSender } from './messaging.entities.ts';
import { SANDBOX_SENDERS } from './messaging.model.ts';

/** SENDER_LOOKUP_SQL for one query, on the caller's connection (inside its transaction when it has one): a named prepared statement (sql.ts). */
const SENDER_WITHIN_SQL = prepared(SENDER_LOOKUP_SQL);

/** The sender of (tenant, channel, address) as SenderLookup finds it, read through `em`'s transaction. */
async function senderWithin(em: EntityManager, tenant: TenantRef, channel: Channel, address: string | null): Promise<string | null> {
  const db = em.getTransactionContext<Transaction<unknown>>() ?? em.getConnection().getClient<unknown>();
  const rows = await sqlQuery<{ address: string | null }>(db, SENDER_WITHIN_SQL, [[tenant.organizationId], [tenant.mode], [channel], [address]]);
  return rows[0]?.address ?? null;
}

export class SenderDirectory {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #lookup: SenderLookup;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#lookup = new SenderLookup(deps.pool);
  }

  /**
   * The address a send goes out from: the requested one when it is a sender of the organization
   * (or the sandbox's, in test mode), else the channel's default (the sandbox's in test mode).
   */
  async resolve(em: EntityManager | undefined, scope: Scope, channel: Channel, requested: string | null): Promise<string> {
    const normalized = requested === null ? null : channel === 'email' ? requested.toLowerCase() : channel === 'sms' || channel === 'whatsapp' ? (normalizePhone(requested) ?? requested) : requested;
    if (normalized !== null && scope.mode === 'test' && normalized === SANDBOX_SENDERS[channel]) return normalized;
    // Inside a caller's transaction the lookup uses it (the batched statement as a prepared statement
    // of that connection: a campaign batch looks its sender up once per batch, and the ORM's query
    // was built, parsed and planned every time); otherwise it joins concurrent lookups in one statement.
    const found = em
      ? await senderWithin(em, scope, channel, normalized)
      : await this.#lookup.find({ tenant: scope, channel, address: normalized });
    if (normalized !== null) {
      if (found) return found;
      const senders = await this.#configured(scope, channel);
      throw new ServiceError('SENDER_NOT_CONFIGURED', `${requested} is not a ${channel} sender of this account; its ${channel} senders: ${listConfigured(senders)}`, { field: 'from', channel, senders });
    }
    if (found) return found;
    if (scope.mode === 'test') return SANDBOX_SENDERS[channel];
    throw new ServiceError('SENDER_NOT_CONFIGURED', `No ${channel} sender is configured; add one (POST /v1/messages/senders) or pass from`, { channel, senders: [] });
  }

  /** The addresses `from` may name on `channel` (an error names them): the sandbox's in test mode, then the organization's. */
  async #configured(scope: Scope, channel: Channel): Promise<string[]> {
    const own = (await this.list(scope, channel)).map((s) => s.address);
    return scope.mode === 'test' ? [SANDBOX_SENDERS[channel], ...own.filter((a) => a !== SANDBOX_SENDERS[channel])] : own;
  }


  async list(scope: Scope, channel?: Channel | null): Promise<MessageSender[]> {
    return tenantEm(this.#orm, scope).find(MessageSender, channel ? { channel } : {}, { orderBy: { id: 'asc' } });
  }

  async add(scope: Scope, input: { channel: Channel; address: string; is_default?: boolean | null }): Promise<MessageSender> {
    let address = input.address.trim();
    if (input.channel === 'sms' || input.channel === 'whatsapp') {
      const phone = normalizePhone(address);
      if (!phone) throw new ServiceError('INVALID_PHONE_NUMBER', `${address} is not an E.164 number`, { field: 'address' });
      address = phone;
    } else if (input.channel === 'email') {
      address = address.toLowerCase();
      if (!isEmail(address)) throw new ServiceError('INVALID_EMAIL', `${address} is not an email address`, { field: 'address' });
    }
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, scope);
    try {
      return await em.transactional(async (tx) => {
        const existing = await tx.count(MessageSender, { channel: input.channel });
        const isDefault = input.is_default ?? existing === 0;
        if (isDefault) await tx.nativeUpdate(MessageSender, { channel: input.channel }, { isDefault: false });
        return tx.create(MessageSender, { id: newId('snd', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, channel: input.channel, address, isDefault, createdAt: now });
      });
    } catch (e) {
      if ((e as { code?: string }).code === '23505' || /unique/i.test(String((e as Error).message))) {
        throw new ServiceError('ALREADY_EXISTS', `${address} is already a ${input.channel} sender`, { field: 'address' });
      }
      throw e;
    }
  }

  async remove(scope: Scope, id: string): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    const removed = await em.nativeDelete(MessageSender, { id });
    if (removed === 0) throw notFound('Sender', id);
  }

  /**
   * The numbers context's hook: an owned phone number becomes a sender of its organization and
   * mode on these channels, inside the caller's transaction (`tx`, bound to the same tenant). The
   * first sender of a channel becomes its default. An address already registered (by anyone) is
   * left as it is: no error, so the caller's transaction is not aborted.
   */
  async attachNumberSender(tx: EntityManager, tenant: TenantRef, address: string, channels: readonly Channel[]): Promise<void> {
    const now = this.#clock.now();
    for (const channel of channels) {
      await tx.getConnection().execute(
        `insert into message_senders (id, organization_id, mode, channel, address, is_default, created_at)
         select ?, ?, ?, ?, ?, not exists (select 1 from message_senders where organization_id = ? and mode = ? and channel = ?), ?
         on conflict (mode, channel, address) do nothing`,
        [newId('snd', now.getTime()), tenant.organizationId, tenant.mode, channel, address, tenant.organizationId, tenant.mode, channel, now],
        'run', tx.getTransactionContext(),
      );
    }
  }

  /** The numbers context's hook: a released number stops being a sender of its organization and mode. */
  async detachNumberSender(tx: EntityManager, tenant: TenantRef, address: string): Promise<void> {
    await tx.getConnection().execute(
      `delete from message_senders where organization_id = ? and mode = ? and address = ? and channel in ('sms', 'whatsapp')`,
      [tenant.organizationId, tenant.mode, address], 'run', tx.getTransactionContext(),
    );
  }
}
