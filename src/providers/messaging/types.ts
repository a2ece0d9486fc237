/**
 * The messaging provider port: one adapter per channel and carrier/vendor. Sandbox adapters
 * (used by test-mode keys) behave like real services: latency, asynchronous status reports,
 * failures and documented magic recipients. Providers never see our entities, only this shape.
 */
export const CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'] as const;
export type Channel = (typeof CHANNELS)[number];

/** Channels whose providers report `read`. */
export const CHANNELS_WITH_READS: ReadonlySet<Channel> = new Set(['whatsapp', 'rcs', 'viber']);

export type OutboundMessage = {
  /** Our message id; also the idempotency key of the send. */
  id: string;
  channel: Channel;
  from: string;
  /** One recipient, except email which may have several. */
  to: string[];
  /** Rendered text body (SMS, Viber, RCS text, WhatsApp text/template text, email text part). */
  body: string | null;
  /**
   * Channel-specific payload, already validated: WhatsApp `{ type, template?, media? }`,
   * email `{ subject, html?, text? }`, RCS `{ type, card?, cards?, suggestions? }`, Viber `{ media_url? }`.
   */
  content: Record<string, unknown>;
};

export type SendResult = { providerMessageId: string };

/** Provider failure. `retryable` failures are retried by the delivery job; others fail the message at once. */
export class ProviderError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  constructor(code: string, message: string, retryable: boolean) {
    super(message);
    this.name = 'ProviderError';
    this.code = code;
    this.retryable = retryable;
  }
}

/** Error codes providers use (stored on failed messages as `error_code`). */
export const PROVIDER_ERROR_CODES = {
  INVALID_RECIPIENT: 'INVALID_RECIPIENT',
  PROVIDER_ERROR: 'PROVIDER_ERROR',
  RCS_NOT_SUPPORTED: 'RCS_NOT_SUPPORTED',
  BOUNCED: 'BOUNCED',
} as const;

/** The statuses a provider reports after a send. */
export const REPORTED_STATUSES = ['sent', 'delivered', 'read', 'failed'] as const;
export type ReportedStatus = (typeof REPORTED_STATUSES)[number];

/** An asynchronous report about an earlier send. */
export type StatusReport = {
  messageId: string;
  providerMessageId: string;
  status: ReportedStatus;
  errorCode?: string;
  /** When the provider observed the status. */
  at: Date;
};

/**
 * Where a provider's later reports go. In the app this stores a row of the sandbox's reports
 * timeline (modules/messaging/messaging.timeline.ts), applied when due through the same code path
 * as a real provider's callback.
 */
export type ReportSink = {
  schedule(report: Omit<StatusReport, 'at'>, delayMs: number): Promise<void>;
};

export interface MessagingProvider {
  readonly name: string;
  readonly channel: Channel;
  /** Sends once per `message.id`: a second call with the same id returns the first result without sending again. */
  send(message: OutboundMessage): Promise<SendResult>;
  /** RCS capability check; channels without one always return true. */
  supports(to: string): Promise<boolean>;
}

export type TemplateSubmission = { id: string; channel: Channel; name: string; content: string; category: string | null; language: string | null };
export type TemplateDecision = {
  templateId: string;
  status: 'approved' | 'rejected';
  reason?: string;
  /** The content and language the decision is about: a decision about content edited since is stale and ignored. */
  submitted?: { content: string; language: string | null };
};

/** Template approval (WhatsApp-style). The sandbox decides after a configurable delay. */
export interface TemplateReviewer {
  submit(template: TemplateSubmission): Promise<void>;
}

/** Where a template reviewer's later decision goes (a durable job in the app). */
export type TemplateDecisionSink = {
  schedule(decision: TemplateDecision, delayMs: number): Promise<void>;
};
