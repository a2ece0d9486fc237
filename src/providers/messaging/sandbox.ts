/**
 * Sandbox messaging provider and template reviewer, used by test-mode keys. They behave like a
 * real carrier: the send takes time, answers with a provider id, and the outcome arrives later as
 * status reports through the ReportSink (rows of the reports timeline in the app, see
 * modules/messaging/messaging.timeline.ts). Nothing leaves the process.
 *
 * Magic values (exported as SANDBOX_MAGIC; the README documents them for API users):
 *
 * | recipient / template            | channels                  | behaviour                                                        |
 * |---------------------------------|---------------------------|------------------------------------------------------------------|
 * | +15005550001                    | all                       | send throws INVALID_RECIPIENT (not retryable); nothing recorded  |
 * | +15005550002                    | all                       | send throws PROVIDER_ERROR (retryable), every time; not recorded |
 * | +15005550003                    | rcs                       | supports() is false; send throws RCS_NOT_SUPPORTED (not retryable) |
 * | +15005550003                    | sms, whatsapp, viber      | an ordinary number                                               |
 * | +15005550004                    | all                       | send is accepted, then no report ever arrives                    |
 * | bounce@sandbox.test             | email                     | accepted, then `failed` with errorCode BOUNCED after deliveredAfterMs |
 * | anything else                   | all                       | accepted, `delivered` after deliveredAfterMs                     |
 * |                                 | whatsapp, rcs, viber      | … and `read` after deliveredAfterMs + readAfterMs                |
 * | template name `reject_…`        | template review           | rejected after reviewAfterMs                                     |
 * | template content with `REJECTME`| template review           | rejected after reviewAfterMs (whole word, case-sensitive)        |
 * | any other template              | template review           | approved after reviewAfterMs                                     |
 *
 * When a message has several recipients (email), the first magic rule matched by any recipient
 * wins, in the order of the table. Email addresses are compared case-insensitively.
 *
 * Idempotency: `message.id` is the idempotency key. The first accepted send is recorded in the
 * SendStore; a repeated send with the same id answers the recorded provider id and sends nothing
 * more, so a job that runs twice never sends twice. Every send, first or repeated, schedules the
 * message's reports: a worker killed after the claim and before the scheduling leaves no message
 * stuck in `sent` (the fault harness found 64 of 10,000 so), and a report that comes twice
 * changes nothing, since status changes only move forward (TransitionWriter).
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SendStore } from './sendStore.ts';
import {
  CHANNELS_WITH_READS,
  PROVIDER_ERROR_CODES,
  ProviderError,
  type Channel,
  type MessagingProvider,
  type OutboundMessage,
  type ReportSink,
  type SendResult,
  type TemplateDecisionSink,
  type TemplateReviewer,
  type TemplateSubmission,
} from './types.ts';

export const SANDBOX_MAGIC = {
  /** Send fails at once: INVALID_RECIPIENT, not retryable. */
  invalidRecipient: '+15005550001',
  /** Send fails every time: PROVIDER_ERROR, retryable. */
  providerError: '+15005550002',
  /** Has no RCS: supports() false on rcs and send throws RCS_NOT_SUPPORTED there; ordinary elsewhere. */
  noRcs: '+15005550003',
  /** Accepted, then silence: no delivery report ever. */
  noReports: '+15005550004',
  /** Email accepted, then a `failed` report with errorCode BOUNCED. */
  bounceEmail: 'bounce@sandbox.test',
  /** Template names starting with this are rejected. */
  rejectTemplatePrefix: 'reject_',
  /** Templates whose content contains this word are rejected. */
  rejectTemplateWord: 'REJECTME',
} as const;

export const SANDBOX_PROVIDER_NAME = 'sandbox';

export type SandboxDelays = {
  /** The provider's own answer time for `send` (a real timer; 0 = answer at once). */
  sendLatencyMs: number;
  /** From the send to the `delivered` (or bounce `failed`) report. */
  deliveredAfterMs: number;
  /** From the `delivered` report to the `read` report, on channels that report reads. */
  readAfterMs: number;
};

export type SandboxMessagingProviderOptions = {
  channel: Channel;
  store: SendStore;
  reports: ReportSink;
  delays: SandboxDelays;
};

/** `SBX` + 24 hex digits. */
export function newSandboxProviderMessageId(): string {
  return `SBX${randomBytes(12).toString('hex')}`;
}

function isRecipient(to: readonly string[], magic: string): boolean {
  const wanted = magic.toLowerCase();
  return to.some((r) => r.trim().toLowerCase() === wanted);
}

export class SandboxMessagingProvider implements MessagingProvider {
  readonly name = SANDBOX_PROVIDER_NAME;
  readonly channel: Channel;
  readonly #store: SendStore;
  readonly #reports: ReportSink;
  readonly #delays: SandboxDelays;

  constructor(options: SandboxMessagingProviderOptions) {
    this.channel = options.channel;
    this.#store = options.store;
    this.#reports = options.reports;
    this.#delays = { ...options.delays };
  }

  async supports(to: string): Promise<boolean> {
    return !(this.channel === 'rcs' && isRecipient([to], SANDBOX_MAGIC.noRcs));
  }

  async send(message: OutboundMessage): Promise<SendResult> {
    if (message.channel !== this.channel) {
      // A wiring bug, not a provider outcome: the registry hands out one provider per channel.
      throw new Error(`Sandbox ${this.channel} provider was asked to send a ${message.channel} message`);
    }
    if (this.#delays.sendLatencyMs > 0) await sleep(this.#delays.sendLatencyMs);
    const to = message.to;
    if (to.length === 0) {
      throw new ProviderError(PROVIDER_ERROR_CODES.INVALID_RECIPIENT, 'The message has no recipient', false);
    }
    if (isRecipient(to, SANDBOX_MAGIC.invalidRecipient)) {
      throw new ProviderError(PROVIDER_ERROR_CODES.INVALID_RECIPIENT, `Sandbox: ${SANDBOX_MAGIC.invalidRecipient} is not a valid recipient`, false);
    }
    if (isRecipient(to, SANDBOX_MAGIC.providerError)) {
      throw new ProviderError(PROVIDER_ERROR_CODES.PROVIDER_ERROR, `Sandbox: the provider failed to send to ${SANDBOX_MAGIC.providerError}`, true);
    }
    if (this.channel === 'rcs' && isRecipient(to, SANDBOX_MAGIC.noRcs)) {
      throw new ProviderError(PROVIDER_ERROR_CODES.RCS_NOT_SUPPORTED, `Sandbox: ${SANDBOX_MAGIC.noRcs} cannot receive RCS`, false);
    }

    const claim = await this.#store.claim({
      idempotencyKey: message.id,
      provider: this.name,
      channel: this.channel,
      providerMessageId: newSandboxProviderMessageId(),
      recipients: [...to],
      payload: { from: message.from, body: message.body, content: message.content },
    });
    await this.#scheduleReports(message, claim.providerMessageId);
    return { providerMessageId: claim.providerMessageId };
  }

  async #scheduleReports(message: OutboundMessage, providerMessageId: string): Promise<void> {
    const base = { messageId: message.id, providerMessageId };
    const { deliveredAfterMs, readAfterMs } = this.#delays;
    if (isRecipient(message.to, SANDBOX_MAGIC.noReports)) return;
    if (this.channel === 'email' && isRecipient(message.to, SANDBOX_MAGIC.bounceEmail)) {
      await this.#reports.schedule({ ...base, status: 'failed', errorCode: PROVIDER_ERROR_CODES.BOUNCED }, deliveredAfterMs);
      return;
    }
    await this.#reports.schedule({ ...base, status: 'delivered' }, deliveredAfterMs);
    if (CHANNELS_WITH_READS.has(this.channel)) {
      await this.#reports.schedule({ ...base, status: 'read' }, deliveredAfterMs + readAfterMs);
    }
  }
}

export type SandboxTemplateReviewerOptions = {
  decisions: TemplateDecisionSink;
  reviewAfterMs: number;
  /** Decisions name the content they are about (`submitted`), so a decision about since-edited content is ignored. */
  echoSubmission?: boolean;
};

const REJECT_WORD = new RegExp(`\\b${SANDBOX_MAGIC.rejectTemplateWord}\\b`);

/** Decides at submission and delivers the decision after `reviewAfterMs`, like a slow human review. */
export class SandboxTemplateReviewer implements TemplateReviewer {
  readonly #decisions: TemplateDecisionSink;
  readonly #reviewAfterMs: number;
  readonly #echoSubmission: boolean;

  constructor(options: SandboxTemplateReviewerOptions) {
    this.#decisions = options.decisions;
    this.#reviewAfterMs = options.reviewAfterMs;
    this.#echoSubmission = options.echoSubmission ?? false;
  }

  async submit(template: TemplateSubmission): Promise<void> {
    const reason = rejectionReason(template);
    const submitted = this.#echoSubmission ? { submitted: { content: template.content, language: template.language } } : {};
    await this.#decisions.schedule(
      reason === undefined ? { templateId: template.id, status: 'approved', ...submitted } : { templateId: template.id, status: 'rejected', reason, ...submitted },
      this.#reviewAfterMs,
    );
  }
}

function rejectionReason(template: TemplateSubmission): string | undefined {
  if (template.name.startsWith(SANDBOX_MAGIC.rejectTemplatePrefix)) {
    return `Sandbox: template names starting with "${SANDBOX_MAGIC.rejectTemplatePrefix}" are rejected`;
  }
  if (REJECT_WORD.test(template.content)) {
    return `Sandbox: template content containing "${SANDBOX_MAGIC.rejectTemplateWord}" is rejected`;
  }
  return undefined;
}
