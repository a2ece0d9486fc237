/**
 * Contacts context: contacts (unique phone and email per organization and mode), tags, per-channel
 * consent (changed and checked only through ConsentService, consent.ts, which also keeps the
 * consent history), inbound SMS keywords (STOP/START/HELP), lists and memberships, segments (rules
 * compiled to one SQL query, see segments.ts), CSV imports on a job, ranked search (search.ts) and
 * the activity timeline (the event backbone, see activity.ts). Writes go through the ORM under the
 * tenant filter; searches, segments, member pages and the timeline are single parameterized SQL
 * queries on the pg pool that name the tenant explicitly.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type ListKey, type Page } from '../../platform/pagination.ts';
import { emitEvent, type EventType } from '../../platform/events/events.ts';
import { parseInput } from '../../platform/operations.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { MessageRecord as Message, MessageSenderPort } from '../messaging/messaging.ports.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { activityPage, latestActivity, type ActivityEntry } from './activity.ts';
import { ConsentService, originOf } from './consent.ts';
import { ConsentCheck } from './consent.check.ts';
import {
  CONSENT_CHANNELS, ConsentChange, Contact, ContactImport, ContactList, ContactListMember, Segment,
  type ConsentChannel, type ConsentSource, type ConsentStatus, type ImportRejection,
} from './contacts.entities.ts';
import { emitContactEvent } from './contacts.events.ts';
import { createContactInput, type CreateContactInput, type ListContactsInput, type ListOptOutsInput, type UpdateContactInput } from './contacts.schemas.ts';
import { parseCsv } from './csv.ts';
import { decodeRankKey, encodeRankKey, rankedSearchSql, searchTerms } from './search.ts';
import { compileRules } from './segments.ts';

export const IMPORT_JOB = 'contacts.import';
const IMPORT_BATCH = 100;
export const MAX_IMPORT_ROWS = 50_000;

/** Inbound SMS keywords: only a message that is exactly one of these (trimmed, any case) counts. */
export const STOP_KEYWORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT']);
export const START_KEYWORDS = new Set(['START', 'UNSTOP']);
export const HELP_KEYWORDS = new Set(['HELP']);
export const STOP_REPLY = 'You have been unsubscribed and will receive no further messages. Reply START to resubscribe.';
export const START_REPLY = 'You have been resubscribed. Reply STOP to unsubscribe, HELP for help.';
export const HELP_REPLY = 'Reply STOP to unsubscribe, START to resubscribe. Msg & data rates may apply.';

const COLUMNS = 'c.id, c.organization_id, c.mode, c.phone, c.email, c.first_name, c.last_name, c.country, c.lifecycle_stage, c.tags, c.metadata, c.consent, c.sequence, c.created_at, c.updated_at';

type Row = Record<string, unknown>;

function rowToContact(r: Row): Contact {
  return {
    id: r.id, organizationId: r.organization_id, mode: r.mode, phone: r.phone, email: r.email, firstName: r.first_name, lastName: r.last_name,
    country: r.country, lifecycleStage: r.lifecycle_stage, tags: r.tags, metadata: r.metadata, consent: r.consent, sequence: r.sequence,
    createdAt: r.created_at, updatedAt: r.updated_at,
  } as unknown as Contact;
}

/** `? … ?` → `$1 … $n` for node-postgres (the compiled SQL never uses `?` operators). */
function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

export type ContactsDeps = {
  orm: MikroORM;
  pool: Pool;
  clock: Clock;
  cursors: CursorCodec;
  jobs: Pick<Jobs, 'enqueue'>;
  messaging: MessageSenderPort;
  /** The batched opt-out lookup behind ConsentService.assertCanContact (one per app, shared). */
  consentCheck?: ConsentCheck;
};

export class ContactsService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #messaging: MessageSenderPort;
  /** The one consent service: every consent change and every consent check goes through it. */
  readonly consent: ConsentService;

  constructor(deps: ContactsDeps) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#messaging = deps.messaging;
    this.consent = new ConsentService({ orm: deps.orm, cursors: deps.cursors, check: deps.consentCheck ?? new ConsentCheck(deps.pool) });
  }

  // ---- contacts ----

  async create(scope: Scope, input: CreateContactInput): Promise<Contact> {
    if (!input.phone && !input.email) throw new ServiceError('MISSING_REQUIRED_FIELD', 'A contact needs a phone or an email', { field: 'phone' });
    const now = this.#clock.now();
    return this.#unique(input, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = tx.create(Contact, {
        id: newId('con', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, phone: input.phone ?? null, email: input.email ?? null,
        firstName: input.first_name ?? null, lastName: input.last_name ?? null, country: input.country ?? null, lifecycleStage: input.lifecycle_stage ?? null,
        tags: uniqueTags([], input.tags ?? []), metadata: input.metadata ?? {}, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
      });
      await tx.flush();
      emitContactEvent(tx, c, 'contact.created', now);
      // Initial consent is a change like any other: history rows and opted_in / opted_out events.
      this.consent.apply(tx, c, input.consent ?? {}, 'api', now, originOf(scope));
      return c;
    }));
  }

  /** ALREADY_EXISTS 409 for a phone or email another contact of the organization and mode has. */
  async #unique<T>(input: { phone?: string | null; email?: string | null }, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      const err = e as { code?: string; constraint?: string; message?: string };
      if (err.code === '23505' || /unique|duplicate key/i.test(String(err.message))) {
        const field = /contacts_email_idx/.test(String(err.message ?? '') + (err.constraint ?? '')) ? 'email' : 'phone';
        throw new ServiceError('ALREADY_EXISTS', `A contact with this ${field} already exists`, { field, value: field === 'email' ? input.email : input.phone });
      }
      throw e;
    }
  }

  async get(scope: Scope, id: string): Promise<Contact> {
    const c = await tenantEm(this.#orm, scope).findOne(Contact, { id });
    if (!c) throw notFound('Contact', id);
    return c;
  }

  /** Several contacts by id in one query (GraphQL loaders); missing ids are left out. */
  async byIds(tenant: TenantRef, ids: readonly string[]): Promise<Contact[]> {
    if (!ids.length) return [];
    return tenantEm(this.#orm, tenant).find(Contact, { id: { $in: [...ids] } });
  }

  async list(scope: Scope, input: ListContactsInput): Promise<Page<Contact>> {
    const filters = { search: input.search ?? null, lifecycle_stage: input.lifecycle_stage ?? null, country: input.country ?? null, tag: input.tag ?? null };
    const where: string[] = [];
    const params: unknown[] = [];
    if (filters.lifecycle_stage) { where.push('c.lifecycle_stage = ?'); params.push(filters.lifecycle_stage); }
    if (filters.country) { where.push('c.country = ?'); params.push(filters.country); }
    if (filters.tag) { where.push('c.tags @> ?::jsonb'); params.push(JSON.stringify([filters.tag])); }
    return this.#page(scope, { list: 'contacts', filters }, where, params, input, filters.search);
  }

  /**
   * A page of contacts matching `where` (predicates over `contacts c` with `?` placeholders):
   * newest first on an id keyset, or, with a search term, best match first on a (score, id) keyset.
   */
  async #page(scope: Scope, key: ListKey, where: string[], params: unknown[], page: { cursor?: string | null; limit?: number | null }, search: string | null): Promise<Page<Contact>> {
    if (!search) return this.#cursors.list(scope, key, page, ({ after, take }) => this.#select(scope, where, params, { after, limit: take }));
    // Ranked: the cursor carries a (score, id) key instead of an id.
    const limit = validateLimit(page.limit);
    const after = page.cursor ? this.#cursors.decode(scope, key, page.cursor) : undefined;
    const afterKey = after === undefined ? undefined : decodeRankKey(after);
    if (after !== undefined && !afterKey) throw new ServiceError('INVALID_CURSOR', 'Cursor is invalid: malformed', { field: 'cursor' });
    const { sql, params: all } = rankedSearchSql(searchTerms(search), { tenant: scope, columns: COLUMNS, where, params }, afterKey, limit + 1);
    const rows = (await this.#pool.query(numbered(sql), all)).rows;
    const scores = new Map<string, number>(rows.map((r) => [String(r.id), Number(r.score)]));
    const items = rows.slice(0, limit).map(rowToContact);
    const hasMore = rows.length > limit;
    const cursorFor = (id: string) => this.#cursors.encode(scope, key, encodeRankKey({ score: scores.get(id) ?? 0, id }));
    return { items, hasMore, nextCursor: hasMore ? cursorFor(items[items.length - 1]!.id) : null, cursorFor };
  }

  /** One query: `where` predicates over `contacts c` (with `?` placeholders), newest first, after a keyset id. */
  async #select(tenant: TenantRef, where: string[], params: unknown[], opts: { after?: string; limit: number; join?: string; joinParams?: unknown[] }): Promise<Contact[]> {
    const all = [...(opts.joinParams ?? []), tenant.organizationId, tenant.mode, ...params];
    const conditions = ['c.organization_id = ?', 'c.mode = ?', ...where];
    if (opts.after) { conditions.push('c.id < ?'); all.push(opts.after); }
    all.push(opts.limit);
    const sql = `select ${COLUMNS} from contacts c ${opts.join ?? ''} where ${conditions.join(' and ')} order by c.id desc limit ?`;
    const res = await this.#pool.query(numbered(sql), all);
    return res.rows.map(rowToContact);
  }

  async update(scope: Scope, id: string, patch: UpdateContactInput): Promise<Contact> {
    const now = this.#clock.now();
    return this.#unique(patch, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      if (patch.phone !== undefined) c.phone = patch.phone;
      if (patch.email !== undefined) c.email = patch.email;
      if (!c.phone && !c.email) throw new ServiceError('VALIDATION_ERROR', 'A contact keeps a phone or an email; both cannot be removed', { field: patch.phone === null ? 'phone' : 'email' });
      if (patch.first_name !== undefined) c.firstName = patch.first_name;
      if (patch.last_name !== undefined) c.lastName = patch.last_name;
      if (patch.country !== undefined) c.country = patch.country;
      if (patch.lifecycle_stage !== undefined) c.lifecycleStage = patch.lifecycle_stage;
      if (patch.tags !== undefined) c.tags = uniqueTags([], patch.tags ?? []);
      if (patch.metadata !== undefined) c.metadata = patch.metadata === null ? {} : mergeMetadata(c.metadata, patch.metadata);
      this.#touch(tx, c, now, 'contact.updated');
      await tx.flush();
      return c;
    }));
  }

  /**
   * Permanent: the contact, its list memberships and its consent history (also cascades). Messages
   * and events stay (the organization's message records and event log); the timeline built from them
   * is reachable only through a contact.
   */
  async remove(scope: Scope, id: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id });
      if (!c) throw notFound('Contact', id);
      await tx.nativeDelete(ContactListMember, { contactId: id });
      await tx.nativeDelete(ConsentChange, { contactId: id });
      await tx.nativeDelete(Contact, { id });
      emitEvent(tx, scope, { type: 'contact.deleted', resourceType: 'contact', resourceId: id, sequence: c.sequence + 1, data: { id, contact_id: id } }, now);
    });
  }

  async addTags(scope: Scope, id: string, tags: string[]): Promise<Contact> {
    return this.#mutate(scope, id, (c) => { c.tags = uniqueTags(c.tags, tags); });
  }

  /** Removing a tag the contact does not have changes nothing (and is not an error). */
  async removeTag(scope: Scope, id: string, tag: string): Promise<Contact> {
    return this.#mutate(scope, id, (c) => { c.tags = c.tags.filter((t) => t !== tag.trim()); });
  }

  async setPreferences(scope: Scope, id: string, preferences: Partial<Record<ConsentChannel, ConsentStatus>>, source: ConsentSource = 'api'): Promise<Contact> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      this.consent.apply(tx, c, preferences, source, now, originOf(scope));
      return c;
    });
  }

  async #mutate(scope: Scope, id: string, change: (c: Contact) => void): Promise<Contact> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Contact, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) throw notFound('Contact', id);
      change(c);
      this.#touch(tx, c, now, 'contact.updated');
      return c;
    });
  }

  #touch(tx: EntityManager, c: Contact, now: Date, type: EventType): void {
    c.sequence += 1;
    c.updatedAt = now;
    emitContactEvent(tx, c, type, now);
  }

  async listOptOuts(scope: Scope, input: ListOptOutsInput): Promise<Page<Contact>> {
    const filters = { channel: input.channel ?? null, search: input.search ?? null };
    const params: unknown[] = [];
    const channels = filters.channel ? [filters.channel] : CONSENT_CHANNELS;
    const where = [`(${channels.map((ch) => { params.push(JSON.stringify({ [ch]: { status: 'opted_out' } })); return 'c.consent @> ?::jsonb'; }).join(' or ')})`];
    return this.#page(scope, { list: 'contact_optouts', filters }, where, params, input, filters.search);
  }

  /** The timeline: events with the contact's phone or email as counterpart, newest first (see activity.ts). */
  async activity(scope: Scope, id: string, page: { cursor?: string | null; limit?: number | null }): Promise<Page<ActivityEntry>> {
    const c = await this.get(scope, id);
    const addresses = [c.phone, c.email].filter((a): a is string => !!a);
    return this.#cursors.list(scope, { list: 'contact_activity', filters: { contact: id } }, page, ({ after, take }) => activityPage(this.#pool, scope, addresses, { after, limit: take }));
  }

  /**
   * Messaging's inbound hook, inside the transaction that stores the inbound message: an SMS that is
   * exactly a keyword opts the sender out (STOP…) or back in (START, UNSTOP), creating the contact
   * when absent (source `keyword`), and answers once per change; HELP always gets the help text.
   * The answer bypasses the opt-out check (it is the last message allowed). A reply that cannot be
   * sent (no provider) does not undo the opt-out.
   */
  async handleInbound(tx: EntityManager, tenant: TenantRef, message: Message): Promise<void> {
    if (message.channel !== 'sms' || message.direction !== 'inbound') return;
    const keyword = (message.body ?? '').trim().toUpperCase();
    const kind = STOP_KEYWORDS.has(keyword) ? 'stop' : START_KEYWORDS.has(keyword) ? 'start' : HELP_KEYWORDS.has(keyword) ? 'help' : undefined;
    if (!kind) return;
    const phone = normalizePhone(message.from);
    if (!phone) return;
    let reply: string | undefined = HELP_REPLY;
    if (kind !== 'help') {
      const now = this.#clock.now();
      let c = await tx.findOne(Contact, { phone }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) {
        c = tx.create(Contact, {
          id: newId('con', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, phone, email: null, firstName: null, lastName: null,
          country: null, lifecycleStage: null, tags: [], metadata: {}, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
        });
        emitContactEvent(tx, c, 'contact.created', now);
      }
      const changed = this.consent.apply(tx, c, { sms: kind === 'stop' ? 'opted_out' : 'opted_in' }, 'keyword', now, { details: { keyword, message_id: message.id } });
      await tx.flush();
      reply = changed.length ? (kind === 'stop' ? STOP_REPLY : START_REPLY) : undefined;
    }
    if (!reply) return;
    const scope = systemScope(tenant.organizationId, tenant.mode, 'starter', `req_keyword_${message.id}`);
    try {
      await this.#messaging.sendSms(scope, { to: phone, body: reply, from: message.to }, { within: tx, bypassConsent: true });
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
    }
  }

  // ---- lists ----

  async createList(scope: Scope, input: { name: string; description?: string | null }): Promise<ContactList> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(ContactList, {
      id: newId('lst', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, description: input.description ?? null, createdAt: now, updatedAt: now,
    }));
  }

  async listLists(scope: Scope, input: { cursor?: string | null; limit?: number | null }): Promise<Page<ContactList>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), ContactList, scope, { list: 'contact_lists' }, input);
  }

  async getList(scope: Scope, id: string): Promise<ContactList> {
    const l = await tenantEm(this.#orm, scope).findOne(ContactList, { id });
    if (!l) throw notFound('Contact list', id);
    return l;
  }

  async updateList(scope: Scope, id: string, patch: { name?: string; description?: string | null }): Promise<ContactList> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const l = await tx.findOne(ContactList, { id });
      if (!l) throw notFound('Contact list', id);
      if (patch.name !== undefined) l.name = patch.name;
      if (patch.description !== undefined) l.description = patch.description;
      l.updatedAt = now;
      return l;
    });
  }

  /** The list and its memberships go; the contacts stay. */
  async deleteList(scope: Scope, id: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      if (!(await tx.findOne(ContactList, { id }))) throw notFound('Contact list', id);
      await tx.nativeDelete(ContactListMember, { listId: id });
      await tx.nativeDelete(ContactList, { id });
    });
  }

  async listMembers(scope: Scope, input: { id: string; cursor?: string | null; limit?: number | null }): Promise<Page<Contact>> {
    await this.getList(scope, input.id);
    return this.#cursors.list(scope, { list: 'contact_list_members', filters: { list: input.id } }, input,
      ({ after, take }) => this.#select(scope, [], [], { after, limit: take, join: 'join contact_list_members m on m.contact_id = c.id and m.list_id = ?', joinParams: [input.id] }));
  }

  /** Adds contacts (already members are skipped); an id that is not a contact of this account is a VALIDATION_ERROR and adds nothing. */
  async addMembers(scope: Scope, id: string, contactIds: string[]): Promise<{ list: ContactList; added: number }> {
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const list = await tx.findOne(ContactList, { id });
      if (!list) throw notFound('Contact list', id);
      const ids = [...new Set(contactIds)];
      const found = new Set((await tx.find(Contact, { id: { $in: ids } }, { fields: ['id'] })).map((c) => c.id));
      const missing = ids.findIndex((x) => !found.has(x));
      if (missing >= 0) throw new ServiceError('VALIDATION_ERROR', `${ids[missing]} is not a contact of this account`, { field: `contact_ids.${contactIds.indexOf(ids[missing]!)}`, value: ids[missing] });
      const existing = new Set((await tx.find(ContactListMember, { listId: id, contactId: { $in: ids } })).map((m) => m.contactId));
      const fresh = ids.filter((x) => !existing.has(x));
      for (const contactId of fresh) tx.create(ContactListMember, { listId: id, contactId, organizationId: scope.organizationId, mode: scope.mode, addedAt: now });
      list.updatedAt = now;
      return { list, added: fresh.length };
    });
  }

  /** Removing a contact that is not a member changes nothing (idempotent, like removing a tag). */
  async removeMember(scope: Scope, id: string, contactId: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      if (!(await tx.findOne(ContactList, { id }))) throw notFound('Contact list', id);
      await tx.nativeDelete(ContactListMember, { listId: id, contactId });
    });
  }

  /**
   * Lists of each of these contacts (GraphQL `Contact.lists`, batched by a request-scoped loader):
   * one query over memberships joined to their lists, newest list first. Every id gets an entry.
   */
  async listsOf(tenant: TenantRef, contactIds: readonly string[]): Promise<Map<string, ContactList[]>> {
    const out = new Map<string, ContactList[]>(contactIds.map((id) => [id, []]));
    if (!contactIds.length) return out;
    const res = await this.#pool.query(
      `select m.contact_id, l.id, l.organization_id, l.mode, l.name, l.description, l.created_at, l.updated_at
         from contact_list_members m
         join contact_lists l on l.id = m.list_id and l.organization_id = $1 and l.mode = $2
        where m.organization_id = $1 and m.mode = $2 and m.contact_id = any($3::text[])
        order by l.id desc`,
      [tenant.organizationId, tenant.mode, [...new Set(contactIds)]],
    );
    for (const r of res.rows) {
      out.get(r.contact_id)?.push({
        id: r.id, organizationId: r.organization_id, mode: r.mode, name: r.name, description: r.description,
        createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at),
      } as ContactList);
    }
    return out;
  }

  /**
   * The newest timeline entry of each contact (GraphQL `Contact.lastActivity`, batched by a
   * request-scoped loader): one query over the events (see activity.ts). Contacts without any are absent.
   */
  async lastActivityOf(tenant: TenantRef, contacts: readonly Pick<Contact, 'id' | 'phone' | 'email'>[]): Promise<Map<string, ActivityEntry>> {
    const addresses = new Map(contacts.map((c) => [c.id, [c.phone, c.email].filter((a): a is string => !!a)]));
    return latestActivity(this.#pool, tenant, addresses);
  }

  // ---- segments ----

  async createSegment(scope: Scope, input: { name: string; description?: string | null; rules: Record<string, unknown> }): Promise<Segment> {
    compileRules(input.rules, this.#clock.now());
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(Segment, {
      id: newId('seg', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, description: input.description ?? null,
      rules: input.rules, createdAt: now, updatedAt: now,
    }));
  }

  async listSegments(scope: Scope, input: { cursor?: string | null; limit?: number | null }): Promise<Page<Segment>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Segment, scope, { list: 'segments' }, input);
  }

  async getSegment(scope: Scope, id: string): Promise<Segment> {
    const s = await tenantEm(this.#orm, scope).findOne(Segment, { id });
    if (!s) throw notFound('Segment', id);
    return s;
  }

  async updateSegment(scope: Scope, id: string, patch: { name?: string; description?: string | null; rules?: Record<string, unknown> }): Promise<Segment> {
    if (patch.rules !== undefined) compileRules(patch.rules, this.#clock.now());
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const s = await tx.findOne(Segment, { id });
      if (!s) throw notFound('Segment', id);
      if (patch.name !== undefined) s.name = patch.name;
      if (patch.description !== undefined) s.description = patch.description;
      if (patch.rules !== undefined) s.rules = patch.rules;
      s.updatedAt = now;
      return s;
    });
  }

  async deleteSegment(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(Segment, { id });
    if (!removed) throw notFound('Segment', id);
  }

  /** The count and the newest `limit` matching contacts, in one query (a window count over the match). */
  async previewRules(scope: Scope, rules: unknown, limit?: number | null): Promise<{ count: number; contacts: Contact[] }> {
    const n = validateLimit(limit);
    const compiled = compileRules(rules, this.#clock.now());
    const sql = `select ${COLUMNS}, count(*) over () as total from contacts c where c.organization_id = ? and c.mode = ? and ${compiled.sql} order by c.id desc limit ?`;
    const res = await this.#pool.query(numbered(sql), [scope.organizationId, scope.mode, ...compiled.params, n]);
    if (res.rows.length) return { count: Number(res.rows[0].total), contacts: res.rows.map(rowToContact) };
    return { count: 0, contacts: [] };
  }

  async previewSegment(scope: Scope, id: string, limit?: number | null): Promise<{ count: number; contacts: Contact[] }> {
    const s = await this.getSegment(scope, id);
    return this.previewRules(scope, s.rules, limit);
  }

  // ---- imports ----

  async startImport(scope: Scope, input: { csv: string; list_id?: string | null }): Promise<ContactImport> {
    const rows = parseCsv(input.csv);
    const header = rows[0]?.map((h) => h.trim().toLowerCase()) ?? [];
    if (!header.includes('phone') && !header.includes('email')) {
      throw new ServiceError('VALIDATION_ERROR', 'The first CSV line must be a header naming a phone or an email column', { field: 'csv', expected: ['phone', 'email', 'first_name', 'last_name', 'country', 'lifecycle_stage', 'tags', 'metadata.<key>', 'consent.<channel>'] });
    }
    const total = rows.length - 1;
    if (total < 1 || total > MAX_IMPORT_ROWS) throw new ServiceError('VALIDATION_ERROR', `A CSV import has 1 to ${MAX_IMPORT_ROWS} rows after the header`, { field: 'csv' });
    if (input.list_id) await this.getList(scope, input.list_id);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const imp = tx.create(ContactImport, {
        id: newId('imp', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, status: 'queued', csv: input.csv, listId: input.list_id ?? null,
        totalRows: total, processedRows: 0, createdCount: 0, updatedCount: 0, rejectedCount: 0, rejections: [], error: null, createdAt: now, updatedAt: now, completedAt: null,
      });
      await tx.flush();
      await this.#jobs.enqueue(IMPORT_JOB, { importId: imp.id }, { scope, em: tx });
      return imp;
    });
  }

  async getImport(scope: Scope, id: string): Promise<ContactImport> {
    const imp = await tenantEm(this.#orm, scope).findOne(ContactImport, { id });
    if (!imp) throw notFound('Contact import', id);
    return imp;
  }

  /**
   * The import job: upserts rows in batches of IMPORT_BATCH, each batch one transaction that also
   * advances the progress counters, so a job that runs again resumes after the last committed batch.
   */
  async runImport(tenant: TenantRef, importId: string): Promise<void> {
    const first = await tenantEm(this.#orm, tenant).findOne(ContactImport, { id: importId }, { populate: ['csv'] });
    if (!first || first.status === 'completed' || first.status === 'failed') return;
    const rows = parseCsv(first.csv);
    const header = rows[0]!.map((h) => h.trim().toLowerCase());
    for (;;) {
      const done = await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const imp = await tx.findOne(ContactImport, { id: importId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!imp || imp.status === 'completed' || imp.status === 'failed') return true;
        const now = this.#clock.now();
        imp.status = 'processing';
        const start = imp.processedRows;
        const end = Math.min(imp.totalRows, start + IMPORT_BATCH);
        const rejections: ImportRejection[] = [];
        for (let i = start; i < end; i++) {
          const rowNumber = i + 2; // 1-based, after the header line
          const outcome = await this.#importRow(tx, tenant, header, rows[i + 1]!, { importId, row: rowNumber, listId: imp.listId ?? null }, now);
          if (outcome === 'created') imp.createdCount++;
          else if (outcome === 'updated') imp.updatedCount++;
          else rejections.push(outcome);
        }
        imp.rejectedCount += rejections.length;
        imp.rejections = [...imp.rejections, ...rejections].slice(0, 1000);
        imp.processedRows = end;
        imp.updatedAt = now;
        if (end >= imp.totalRows) {
          imp.status = 'completed';
          imp.completedAt = now;
          imp.csv = '';
          return true;
        }
        return false;
      });
      if (done) return;
    }
  }

  /** One CSV row: validated like a created contact, upserted by phone, else email; `consent.<channel>` columns go through the consent service (source `import`). */
  async #importRow(tx: EntityManager, tenant: TenantRef, header: string[], cells: string[], at: { importId: string; row: number; listId: string | null }, now: Date): Promise<'created' | 'updated' | ImportRejection> {
    const { row, listId } = at;
    const raw: Record<string, unknown> = {};
    const metadata: Record<string, unknown> = {};
    const consent: Record<string, string> = {};
    header.forEach((h, i) => {
      const v = (cells[i] ?? '').trim();
      if (v === '') return;
      if (h.startsWith('metadata.') && h.length > 9) metadata[h.slice(9)] = v;
      else if (h.startsWith('consent.') && h.length > 8) consent[h.slice(8)] = v.toLowerCase();
      else if (h === 'tags') raw.tags = v.split(/[;|]/).map((t) => t.trim()).filter(Boolean);
      else if (['phone', 'email', 'first_name', 'last_name', 'country', 'lifecycle_stage'].includes(h)) raw[h] = v;
    });
    if (Object.keys(metadata).length) raw.metadata = metadata;
    if (Object.keys(consent).length) raw.consent = consent;
    let input: CreateContactInput;
    try {
      input = parseInput(createContactInput, raw);
    } catch (e) {
      if (e instanceof ServiceError) return { row, code: e.code, field: e.details.field as string | undefined, message: e.message };
      throw e;
    }
    if (!input.phone && !input.email) return { row, code: 'MISSING_REQUIRED_FIELD', field: 'phone', message: 'A row needs a phone or an email' };
    const byPhone = input.phone ? await tx.findOne(Contact, { phone: input.phone }) : null;
    const byEmail = input.email ? await tx.findOne(Contact, { email: input.email }) : null;
    if (byPhone && byEmail && byPhone.id !== byEmail.id) {
      return { row, code: 'ALREADY_EXISTS', field: 'email', message: `The phone and the email belong to two different contacts (${byPhone.id}, ${byEmail.id})` };
    }
    let c = byPhone ?? byEmail;
    let outcome: 'created' | 'updated';
    if (c) {
      if (input.phone) c.phone = input.phone;
      if (input.email) c.email = input.email;
      if (input.first_name) c.firstName = input.first_name;
      if (input.last_name) c.lastName = input.last_name;
      if (input.country) c.country = input.country;
      if (input.lifecycle_stage) c.lifecycleStage = input.lifecycle_stage;
      if (input.tags) c.tags = uniqueTags(c.tags, input.tags);
      if (input.metadata) c.metadata = mergeMetadata(c.metadata, input.metadata);
      this.#touch(tx, c, now, 'contact.updated');
      outcome = 'updated';
    } else {
      c = tx.create(Contact, {
        id: newId('con', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, phone: input.phone ?? null, email: input.email ?? null,
        firstName: input.first_name ?? null, lastName: input.last_name ?? null, country: input.country ?? null, lifecycleStage: input.lifecycle_stage ?? null,
        tags: uniqueTags([], input.tags ?? []), metadata: input.metadata ?? {}, consent: {}, sequence: 1, createdAt: now, updatedAt: now,
      });
      emitContactEvent(tx, c, 'contact.created', now);
      outcome = 'created';
    }
    this.consent.apply(tx, c, input.consent ?? {}, 'import', now, { details: { import_id: at.importId, row } });
    // Flushed per row: the next row's lookups must see this one (two rows with one phone upsert one contact).
    await tx.flush();
    if (listId) {
      await tx.getConnection().execute(
        'insert into contact_list_members (list_id, contact_id, organization_id, mode, added_at) values (?, ?, ?, ?, ?) on conflict do nothing',
        [listId, c.id, tenant.organizationId, tenant.mode, now], 'run', tx.getTransactionContext(),
      );
    }
    return outcome;
  }
}

/** Existing tags, then new ones not already present (case-sensitive, trimmed), in order. */
export function uniqueTags(existing: readonly string[], added: readonly string[]): string[] {
  const out = [...existing];
  for (const t of added.map((x) => x.trim())) if (t && !out.includes(t)) out.push(t);
  return out;
}

/** Shallow merge: given keys replace, a null value removes its key. */
export function mergeMetadata(existing: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...existing };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}
