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

export type SendResult = {
  providerMessageId: string;
  /** The provider that carried the message, when not the one asked (a router's connector, or the connector that sent it first). */
  provider?: string;
};

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
  /** A carrier connector has no usable link (not bound, or it gave up waiting for one). */
  CONNECTOR_UNAVAILABLE: 'CONNECTOR_UNAVAILABLE',
  /** An earlier attempt recorded the send and died before its outcome: sending again could send twice. */
  SEND_IN_DOUBT: 'SEND_IN_DOUBT',
} as const;

/**
 * A connector accepted some segments of the message and not yet the others: only that connector
 * may send the rest (another one would deliver the accepted segments twice). Retryable.
 */
export class PinnedToConnector extends ProviderError {
  readonly connectorId: string;
  constructor(connectorId: string) {
    super(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `Part of the message went out through connector ${connectorId}: only it may send the rest`, true);
    this.name = 'PinnedToConnector';
    this.connectorId = connectorId;
  }
}

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

/** A carrier connector's health: connected (every bind up), degraded (some binds, or the SMSC asks to slow down), down (nothing can be submitted). */
export const CONNECTOR_STATES = ['connected', 'degraded', 'down'] as const;
export type ConnectorState = (typeof CONNECTOR_STATES)[number];
export type ConnectorStatus = {
  state: ConnectorState;
  /** The last failure (bind refused, connection lost, throttled), kept after recovery; null before any. */
  lastError: string | null;
  lastErrorAt: Date | null;
  /** Binds up and configured. */
  bound: number;
  binds: number;
};

/**
 * What a carrier connector hands the messaging context: delivery receipts that decided a message's
 * outcome (applied through the same forward-only status path as every report), mobile-originated
 * messages, and its status changes.
 */
export type CarrierEvents = {
  /** Resolves once the status is applied (or known to be moot); throws when it cannot be now (the carrier will repeat the receipt). */
  report(report: Omit<StatusReport, 'at'> & { provider: string; at: Date }): Promise<void>;
  /** A mobile-originated message to `to`; `stored` once stored, `no_owner` when no organization has that address. */
  inbound(message: { connectorId: string; from: string; to: string; body: string; providerMessageId?: string; mediaUrls?: string[]; content?: Record<string, unknown> }): Promise<'stored' | 'no_owner'>;
  status(connectorId: string, status: ConnectorStatus): void;
};
