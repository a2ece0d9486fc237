/**
 * The send engine. Sending starts with a frozen audience (`snapshot`: one recipient row per
 * de-duplicated address, written in one transaction with the first batch jobs), then batches of
 * recipients leave on pg-boss jobs paced by the sender's 10DLC throughput (platform/pacing.ts).
 *
 * Exactly once: a batch locks its pending rows, accepts each message through messaging's
 * `messageSender` port inside the same transaction (`within`, gathered in a `SendBatch` and written
 * with one statement), and marks the rows sent with their message ids before it commits. A crash rolls all of it back (no message, rows still pending); a
 * second run of the same batch waits for the lock and finds the rows no longer pending. Pause and
 * cancel stop batches at their start; resume dispatches whatever is still pending. Live-mode
 * messages are paid in the same transaction (billing's `campaignCredits`, keyed by message id), so
 * a message and its charge commit or roll back together.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Pool } from 'pg';
import type { Config } from '../../config.ts';
import { TenantRowReader } from '../../platform/db/rowReads.ts';
import { entityColumns } from '../../platform/db/groupInsert.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Ports as AllPorts } from '../manifest.ts';
import { stableJobId } from '../../platform/jobs/jobIds.ts';
import type { CampaignCharge, CampaignCreditsPort } from './campaigns.ports.ts';
import { Campaign } from './campaigns.entities.ts';
import { pacingKey, reserveSlots } from '../../platform/pacing.ts';
import { addressFor, assignVariant, bucket, personalize, quietUntil, timezoneFor, type ContactFields } from './campaigns.rules.ts';
import {
  hasPending, insertRecipients, sql, lockPending, pendingSeqs, recentSends, recordOutcomes, releaseDeferred,
  type NewRecipient, type PendingRecipient, type RecipientOutcome,
} from './campaigns.recipients.ts';
import { emitCampaignEvent } from './campaigns.events.ts';
import { openVars, storeVars } from './campaigns.phi.ts';
import type { PhiPort } from '../../platform/phi.ts';
import type { SendBatch } from '../messaging/messaging.ports.ts';

export const SNAPSHOT_JOB = 'campaigns.snapshot';
export const BATCH_JOB = 'campaigns.batch';
export const RELEASE_JOB = 'campaigns.release-deferred';
export const WINNER_JOB = 'campaigns.pick-winner';

const AUDIENCE_PAGE = 5000;

type Ports = {
  audience: AllPorts['campaignAudience'];
  sender: AllPorts['messageSender'];
  throughput: AllPorts['senderThroughput'];
  outcomes: AllPorts['messageOutcomes'];
  credits: () => CampaignCreditsPort | undefined;
  /** HIPAA mode: the recipients' contact fields are stored sealed (campaigns.phi.ts). */
  phi: () => PhiPort | undefined;
  quotas: () => AllPorts['planQuotas'] | undefined;
};

/**
 * Errors of a send (or of the batch's charge) that stop the campaign rather than fail a recipient:
 * the campaign pauses with the code in lower case as pause_reason and the rest stays pending.
 */
const PAUSING_CODES = new Set(['INSUFFICIENT_CREDITS', 'SUBSCRIPTION_INACTIVE', 'QUOTA_EXCEEDED']);

/** Thrown inside a batch's transaction to roll it back: the balance covered the messages before recipient `seq` only. */
class ShortOfCredits extends Error {
  readonly seq: number;
  constructor(seq: number) {
    super(`credits cover the batch up to recipient ${seq}`);
    this.seq = seq;
  }
}

export type BatchJob = { campaignId: string; from: number; to: number; generation: number };
/** A pending recipient with its contact fields opened. */
type Opened = Omit<PendingRecipient, 'vars'> & { vars: ContactFields };

/** A recipient's send: its outcome and what to charge, or why the campaign stops (the row stays pending). */
type SendResult = { outcome: RecipientOutcome; charge?: CampaignCharge } | { stop: string };

export class CampaignEngine {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #ports: Ports;
  readonly #campaigns: TenantRowReader<Campaign>;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; config: Config; jobs: Pick<Jobs, 'enqueue'>; ports: Ports }) {
    this.#orm = deps.orm;
    this.#campaigns = new TenantRowReader<Campaign>(deps.pool, 'campaigns', entityColumns(deps.orm.getMetadata().get(Campaign).properties));
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#jobs = deps.jobs;
    this.#ports = deps.ports;
  }

  /** msg/s for this campaign's sender, or null for unpaced. Throws for an unregistered US long code in live mode. */
  async throughputFor(scope: Scope, c: Campaign): Promise<number | null> {
    if (c.channel !== 'sms') return null;
    const registered = c.from ? await this.#ports.throughput.throughputOf(scope, c.from) : null;
    if (registered !== null) return registered;
    if (scope.mode === 'test') return this.#config.campaigns.sandboxThroughput || null;
    if (!c.from) throw new ServiceError('SENDER_NOT_CONFIGURED', 'Live SMS campaigns need `from`: a number with an approved 10DLC registration', { field: 'from', reason: '10dlc_unregistered' });
    if (c.from.startsWith('+1')) {
      throw new ServiceError('SENDER_NOT_CONFIGURED', `${c.from} has no approved 10DLC campaign; US long codes must be registered before campaign sends`, { field: 'from', reason: '10dlc_unregistered' });
    }
    return null;
  }

  /** Called in the transaction that moves a campaign to sending: the snapshot runs on a job. */
  async start(tx: EntityManager, scope: Scope, c: Campaign): Promise<void> {
    if (c.snapshotAt) {
      await this.dispatch(tx, scope, c, await pendingSeqs(tx, c.id));
      return;
    }
    await this.#jobs.enqueue(SNAPSHOT_JOB, { campaignId: c.id }, { scope, em: tx, id: stableJobId(SNAPSHOT_JOB, c.id) });
  }

  /** The snapshot job: freezes the audience; safe to run twice (the second finds snapshot_at set). */
  async snapshot(scope: Scope, campaignId: string): Promise<void> {
    const c = await tenantEm(this.#orm, scope).findOne(Campaign, { id: campaignId });
    if (!c || c.snapshotAt || (c.status !== 'sending' && c.status !== 'paused')) return;
    const frozen = await this.#freeze(scope, c);
    // HIPAA mode: the contact fields each recipient is personalized with are stored sealed.
    const writer = (await this.#ports.phi()?.writer(scope.organizationId)) ?? null;
    const rows = writer ? frozen.map((r) => ({ ...r, vars: storeVars(writer, c.id, r.seq, r.vars as ContactFields) })) : frozen;
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const locked = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!locked || locked.snapshotAt || (locked.status !== 'sending' && locked.status !== 'paused')) return;
      const now = this.#clock.now();
      await insertRecipients(tx, scope, locked.id, rows);
      locked.audienceCount = rows.length;
      locked.snapshotAt = now;
      locked.updatedAt = now;
      await tx.flush();
      const winner = locked.abTest?.winner;
      if (winner) {
        const at = new Date((locked.startedAt ?? now).getTime() + winner.after_minutes * 60_000);
        await this.#jobs.enqueue(WINNER_JOB, { campaignId: locked.id }, { scope, em: tx, id: stableJobId(WINNER_JOB, locked.id), startAfter: at });
      }
      if (locked.status === 'sending') await this.dispatch(tx, scope, locked, rows.filter((r) => r.status === 'pending' && !r.waitReason).map((r) => r.seq));
    });
    await this.completeIfDone(scope, campaignId);
  }

  async #freeze(scope: Scope, c: Campaign): Promise<NewRecipient[]> {
    const source = { segmentId: c.segmentId ?? null, listId: c.listId ?? null };
    const variants = c.abTest?.variants ?? [];
    const winner = c.abTest?.winner;
    const seen = new Set<string>();
    const rows: NewRecipient[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await this.#ports.audience.audiencePage(scope, source, after, AUDIENCE_PAGE);
      for (const m of page) {
        const vars: ContactFields = { first_name: m.firstName, last_name: m.lastName, phone: m.phone, email: m.email, country: m.country, metadata: m.metadata };
        const found = addressFor(c.channel, m);
        const base = { seq: rows.length + 1, contactId: m.contactId, vars, variant: null, waitReason: null };
        if ('skip' in found) {
          rows.push({ ...base, address: null, status: 'skipped', reason: found.skip });
          continue;
        }
        if (seen.has(found.address)) continue;
        seen.add(found.address);
        const held = winner && bucket(`test:${m.contactId}`) * 100 >= winner.test_percent;
        rows.push({
          ...base, address: found.address, status: 'pending', reason: null,
          variant: held ? null : assignVariant(m.contactId, variants), waitReason: held ? 'ab_test_winner' : null,
        });
      }
      if (page.length < AUDIENCE_PAGE) break;
      after = page[page.length - 1]!.contactId;
    }
    return rows;
  }

  /** Enqueues batch jobs for `seqs` (pending rows), each with its paced `startAfter`. */
  async dispatch(tx: EntityManager, scope: Scope, c: Campaign, seqs: readonly number[]): Promise<void> {
    if (seqs.length === 0) return;
    const now = this.#clock.now();
    const rate = await this.throughputFor(scope, c);
    const size = rate ? Math.max(1, Math.min(this.#config.campaigns.batchSize, Math.ceil(rate / 4))) : this.#config.campaigns.batchSize;
    const pace = rate ? await reserveSlots(tx, pacingKey(scope, c.channel, c.from ?? null), seqs.length, rate, now) : null;
    for (let i = 0; i < seqs.length; i += size) {
      const from = seqs[i]!;
      const to = seqs[Math.min(i + size, seqs.length) - 1]!;
      const startAfter = pace ? new Date(pace.start.getTime() + i * pace.intervalMs) : undefined;
      await this.#jobs.enqueue(BATCH_JOB, { campaignId: c.id, from, to, generation: c.generation } satisfies BatchJob, {
        scope, em: tx, id: stableJobId(BATCH_JOB, c.id, c.generation, from), ...(startAfter && startAfter > now ? { startAfter } : {}),
      });
    }
  }

  /**
   * The batch job: sends the range's pending recipients once (see the file comment). With billing
   * installed, the accepted messages are charged in the same transaction; when the balance covers
   * only the first k of them, the transaction rolls back and the batch runs again sending only
   * those k, then the campaign pauses (insufficient_credits) with the rest still pending. A plan
   * quota that runs out (planQuotas) does the same with quota_exceeded.
   */
  async runBatch(scope: Scope, job: BatchJob): Promise<void> {
    // A plain read (a named statement shared by the concurrent batches): the ORM's query was built,
    // parsed and planned for every batch, and its entity tracked though the batch only reads it.
    const c = await this.#campaigns.byId(scope, job.campaignId);
    if (!c || c.status !== 'sending') return;
    let stopBefore = Number.POSITIVE_INFINITY;
    let pauseReason: string | null;
    for (;;) {
      try {
        pauseReason = await this.#batchOnce(scope, c, job, stopBefore);
        break;
      } catch (e) {
        if (e instanceof ShortOfCredits) { stopBefore = e.seq; continue; }
        if (e instanceof ServiceError && PAUSING_CODES.has(e.code)) { pauseReason = e.code.toLowerCase(); break; }
        throw e;
      }
    }
    if (pauseReason) await this.pauseFor(scope, c.id, pauseReason);
    await this.completeIfDone(scope, c.id);
  }

  /** One attempt of a batch in one transaction: recipients from `stopBefore` on stay pending. Returns why the campaign must pause, if it must. */
  async #batchOnce(scope: Scope, c: Campaign, job: BatchJob, stopBefore: number): Promise<string | null> {
    let deferredUntil: Date | null = null;
    let pauseReason: string | null = stopBefore < Number.POSITIVE_INFINITY ? 'insufficient_credits' : null;
    const batch = this.#ports.sender.sendBatch();
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const locked = (await lockPending(tx, c.id, job.from, job.to)).filter((r) => r.seq < stopBefore);
      if (locked.length === 0) return;
      const rows = await openVars(this.#ports.phi(), scope, c.id, locked);
      const now = this.#clock.now();
      const outcomes: RecipientOutcome[] = [];
      const toSend: Opened[] = [];
      const capped = await this.#capped(tx, scope, c, rows, now);
      // In this transaction: concurrent batches of the organization take turns until commit, so they never pass the quota together.
      const allowance = (await this.#ports.quotas()?.remaining(scope, 'messages', tx)) ?? null;
      for (const r of rows) {
        if (capped.has(r.address)) { outcomes.push({ seq: r.seq, status: 'skipped', reason: 'frequency_cap', messageId: null }); continue; }
        const until = c.quietHours ? quietUntil(now, c.quietHours, timezoneFor(r.vars, c.quietHours.timezone)) : null;
        if (until) {
          outcomes.push({ seq: r.seq, status: 'pending', reason: null, messageId: null, waitReason: 'quiet_hours', notBefore: until });
          if (!deferredUntil || until < deferredUntil) deferredUntil = until;
          continue;
        }
        if (allowance !== null && toSend.length >= allowance) { pauseReason = 'quota_exceeded'; break; }
        toSend.push(r);
      }
      const charges: (CampaignCharge & { seq: number })[] = [];
      // Uncharged sends are gathered and written with one statement below. Test mode's sends are
      // never charged, so they are checked and rendered at once (their consent checks and sender
      // lookup share statements); live sends may be charged (each written at once, in a savepoint
      // of this transaction, its credit reserved), so they go one after the other, in recipient
      // order, and the first that stops the campaign ends the batch. Outcomes are taken in
      // recipient order; a stop drops the gathered sends after it.
      const results: SendResult[] = [];
      if (scope.mode === 'test') {
        results.push(...await Promise.all(toSend.map((r) => this.#sendOne(tx, scope, c, r, batch))));
      } else {
        for (const r of toSend) {
          const sent = await this.#sendOne(tx, scope, c, r, batch);
          results.push(sent);
          if ('stop' in sent) break;
        }
      }
      const kept = new Set<string>();
      for (const [i, sent] of results.entries()) {
        if ('stop' in sent) { pauseReason = sent.stop; break; }
        outcomes.push(sent.outcome);
        if (sent.outcome.messageId) kept.add(sent.outcome.messageId);
        if (sent.charge) charges.push({ ...sent.charge, seq: toSend[i]!.seq });
      }
      await batch.commit(tx, kept);
      const credits = this.#ports.credits();
      if (credits && charges.length) {
        const covered = await credits.charge(scope, charges, tx);
        if (covered < charges.length) throw new ShortOfCredits(charges[covered]!.seq);
      }
      await recordOutcomes(tx, c.id, outcomes, now);
      if (deferredUntil) {
        await this.#jobs.enqueue(RELEASE_JOB, { campaignId: c.id }, { scope, em: tx, id: stableJobId(RELEASE_JOB, c.id, (deferredUntil as Date).toISOString()), startAfter: deferredUntil });
      }
    });
    // Committed: the messages' deliveries go to this instance's delivery loops (already claimed).
    batch.committed();
    return pauseReason;
  }

  async #capped(tx: EntityManager, scope: Scope, c: Campaign, rows: readonly Pick<PendingRecipient, 'address'>[], now: Date): Promise<Set<string>> {
    const cap = c.frequencyCap;
    if (!cap) return new Set();
    const counts = await recentSends(tx, scope, rows.map((r) => r.address), new Date(now.getTime() - cap.period_hours * 3_600_000));
    return new Set([...counts].filter(([, n]) => n >= cap.max_messages).map(([address]) => address));
  }

  /** Sends one recipient's message: its outcome and what to charge, or `stop` when the organization cannot send more now (the row stays pending). */
  async #sendOne(tx: EntityManager, scope: Scope, c: Campaign, r: Opened, batch: SendBatch): Promise<SendResult> {
    const variant = r.variant ? c.abTest?.variants.find((v) => v.name === r.variant) : undefined;
    const templateId = variant ? (variant.template_id ?? null) : (c.templateId ?? null);
    const rawBody = variant ? (variant.body ?? null) : (c.body ?? null);
    const body = rawBody === null ? undefined : personalize(rawBody, r.vars);
    const metadata = { campaign_id: c.id, ...(r.variant ? { campaign_variant: r.variant } : {}) };
    const from = c.from ?? undefined;
    try {
      let message: { id: string; channel: string; segments?: number | null; recipients: readonly string[] };
      // SMS, RCS and Viber take a body or a template with per-recipient variables.
      const content = {
        ...(body !== undefined ? { body } : {}),
        ...(templateId ? { template_id: templateId, variables: Object.fromEntries(Object.entries(c.templateVariables).map(([k, v]) => [k, personalize(v, r.vars)])) } : {}),
      };
      if (c.channel === 'sms') {
        message = await this.#ports.sender.sendSms(scope, { to: r.address, ...content, from, metadata }, { within: tx, batch });
      } else if (c.channel === 'email') {
        message = await this.#ports.sender.sendEmail(scope, { to: [r.address], subject: personalize(c.subject ?? '', r.vars), text: body ?? '', from, metadata }, { within: tx, batch });
      } else if (c.channel === 'whatsapp') {
        message = await this.#ports.sender.sendWhatsApp(scope, { to: r.address, kind: 'text', text: { body: body ?? '' }, from, metadata }, { within: tx, batch });
      } else if (c.channel === 'rcs') {
        // A text RCS message; a recipient without RCS gets it as an SMS (messaging's fallback, SMS consent applies).
        message = await this.#ports.sender.sendRcs(scope, { to: r.address, type: 'text', ...content, fallback: { channel: 'sms' }, from, metadata }, { within: tx, batch });
      } else {
        message = await this.#ports.sender.sendViber(scope, { to: r.address, ...content, from, metadata }, { within: tx, batch });
      }
      const units = message.channel === 'sms' ? (message.segments ?? 1) : message.channel === 'email' ? message.recipients.length : 1;
      return { outcome: { seq: r.seq, status: 'sent', reason: null, messageId: message.id }, charge: { messageId: message.id, channel: message.channel, units } };
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      if (PAUSING_CODES.has(e.code)) return { stop: e.code.toLowerCase() };
      if (e.code === 'RECIPIENT_OPTED_OUT') return { outcome: { seq: r.seq, status: 'skipped', reason: 'opted_out', messageId: null } };
      if (e.code === 'INVALID_PHONE_NUMBER' || e.code === 'INVALID_EMAIL' || e.code === 'INVALID_RECIPIENT') return { outcome: { seq: r.seq, status: 'skipped', reason: 'invalid', messageId: null } };
      return { outcome: { seq: r.seq, status: 'failed', reason: e.code, messageId: null } };
    }
  }

  /** The quiet-hours job: frees the recipients whose window ended and dispatches them. */
  async release(scope: Scope, campaignId: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c || c.status !== 'sending') return;
      const { released, next } = await releaseDeferred(tx, c.id, this.#clock.now());
      await this.dispatch(tx, scope, c, released);
      if (next) await this.#jobs.enqueue(RELEASE_JOB, { campaignId: c.id }, { scope, em: tx, id: stableJobId(RELEASE_JOB, c.id, next.toISOString()), startAfter: next });
    });
  }

  /**
   * The A/B winner job: compares the test group's variants on the metric (rate over messages sent,
   * ties to the first variant) and gives the held-back recipients the winner.
   */
  async pickWinner(scope: Scope, campaignId: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const winner = c?.abTest?.winner;
      if (!c || !winner || c.winnerVariant || (c.status !== 'sending' && c.status !== 'paused')) return;
      const sent = await sql<{ message_id: string; variant: string }>(tx,
        `select message_id, variant from campaign_recipients where campaign_id = ? and message_id is not null and variant is not null`, [c.id]);
      const counts = await this.#ports.outcomes.countByGroup(scope, sent.map((r) => r.message_id), sent.map((r) => r.variant));
      const rate = (name: string) => {
        const n = counts.find((x) => x.group === name);
        return n && n.sent + n.failed > 0 ? n[winner.metric] / (n.sent + n.failed) : 0;
      };
      const variants = c.abTest!.variants;
      const best = variants.reduce((a, b) => (rate(b.name) > rate(a.name) ? b : a), variants[0]!);
      const now = this.#clock.now();
      c.winnerVariant = best.name;
      c.updatedAt = now;
      await tx.flush();
      const held = await sql<{ seq: number }>(tx,
        `update campaign_recipients set variant = ?, wait_reason = null where campaign_id = ? and status = 'pending' and wait_reason = 'ab_test_winner' returning seq`,
        [best.name, c.id]);
      if (c.status === 'sending') await this.dispatch(tx, scope, c, held.map((r) => r.seq).sort((a, b) => a - b));
    });
  }

  /** After a resume: the quiet-hours job again, when recipients are still deferred. */
  async scheduleRelease(tx: EntityManager, scope: Scope, c: Campaign): Promise<void> {
    const rows = await sql<{ at: string | Date | null }>(tx,
      `select min(not_before) as at from campaign_recipients where campaign_id = ? and status = 'pending' and wait_reason = 'quiet_hours'`, [c.id]);
    const at = rows[0]?.at ? new Date(rows[0].at) : null;
    if (at) await this.#jobs.enqueue(RELEASE_JOB, { campaignId: c.id }, { scope, em: tx, id: stableJobId(RELEASE_JOB, c.id, c.generation, at.toISOString()), startAfter: at });
  }

  /** Completes a sending campaign once nothing is pending (and the audience is frozen). */
  async completeIfDone(scope: Scope, campaignId: string): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    if (await hasPending(em, campaignId)) return;
    await em.transactional(async (tx) => {
      const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c || c.status !== 'sending' || !c.snapshotAt || await hasPending(tx, c.id)) return;
      const now = this.#clock.now();
      c.status = 'completed';
      c.completedAt = now;
      c.updatedAt = now;
      c.sequence += 1;
      emitCampaignEvent(tx, scope, c, 'campaign.completed', now);
    });
  }

  /** Pauses a sending campaign by itself (insufficient_credits, subscription_inactive, quota_exceeded): the remaining recipients stay pending. */
  async pauseFor(scope: Scope, campaignId: string, reason: string): Promise<void> {
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c || c.status !== 'sending') return;
      const now = this.#clock.now();
      c.status = 'paused';
      c.pauseReason = reason;
      c.pausedAt = now;
      c.updatedAt = now;
      c.sequence += 1;
      emitCampaignEvent(tx, scope, c, 'campaign.paused', now);
    });
  }
}
