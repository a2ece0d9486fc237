/**
 * Live email over SMTP (nodemailer), configured by one URL: `smtp://user:pass@host:port` (plain,
 * upgraded with STARTTLS when the server offers it) or `smtps://…` (TLS from the start). Query
 * parameters are nodemailer options and override the defaults below (`?socketTimeout=30000`).
 *
 * SMTP has no idempotency key. Once the server has answered 250 to DATA the message is gone; if the
 * process dies before the delivery job records `sent`, the job runs again and the email is sent a
 * second time. What this adapter does about it:
 * - nothing runs between the server's acceptance and returning the result;
 * - timeouts stay well below a job's lifetime, so a slow server fails this attempt (retryable)
 *   instead of letting a second attempt overlap a first one that may still succeed;
 * - every attempt carries the same `Message-ID: <message id@sender domain>` and `X-Message-Id`,
 *   so a duplicate is recognisable downstream (and mail clients that dedupe by Message-ID do).
 * A 250 for some recipients and a rejection for others counts as sent: what went out cannot be
 * taken back, and failing the message would invite a retry that sends it twice to the others.
 */
import nodemailer, { type NodemailerError, type SendMailOptions, type SMTPSentMessageInfo, type Transporter } from 'nodemailer';
import { PROVIDER_ERROR_CODES, ProviderError, type MessagingProvider, type OutboundMessage, type SendResult } from './types.ts';

export const SMTP_PROVIDER_NAME = 'smtp';

/** Defaults (ms) chosen to end an attempt long before the delivery job would be considered lost. */
const DEFAULT_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 60_000, dnsTimeout: 10_000 };

export class SmtpEmailProvider implements MessagingProvider {
  readonly name = SMTP_PROVIDER_NAME;
  readonly channel = 'email' as const;
  readonly #transport: Transporter<SMTPSentMessageInfo>;

  constructor(url: string) {
    let protocol: string;
    try {
      protocol = new URL(url).protocol;
    } catch {
      throw new Error('The SMTP URL is not a URL (expected smtp://user:pass@host:port or smtps://…)');
    }
    if (protocol !== 'smtp:' && protocol !== 'smtps:') {
      throw new Error(`The SMTP URL must start with smtp:// or smtps://, got ${protocol}//`);
    }
    this.#transport = nodemailer.createTransport({
      url,
      ...DEFAULT_TIMEOUTS,
      // Tenant content is only ever passed as strings, but refuse paths and URLs as content anyway.
      disableFileAccess: true,
      disableUrlAccess: true,
    });
  }

  async supports(_to: string): Promise<boolean> {
    return true;
  }

  async send(message: OutboundMessage): Promise<SendResult> {
    if (message.channel !== 'email') {
      throw new Error(`The SMTP provider was asked to send a ${message.channel} message`);
    }
    const content = message.content;
    const mail: SendMailOptions = {
      from: message.from,
      to: message.to,
      subject: stringOr(content.subject, ''),
      text: stringOr(content.text, message.body ?? undefined),
      html: stringOr(content.html, undefined),
      replyTo: stringOr(content.reply_to, undefined),
      messageId: `<${message.id}@${domainOf(message.from)}>`,
      headers: { 'X-Message-Id': message.id },
    };
    let info: SMTPSentMessageInfo;
    try {
      info = await this.#transport.sendMail(mail);
    } catch (err) {
      throw smtpErrorToProviderError(err);
    }
    return { providerMessageId: info.messageId };
  }

  async close(): Promise<void> {
    this.#transport.close();
  }
}

function stringOr<T extends string | undefined>(value: unknown, fallback: T): string | T {
  return typeof value === 'string' ? value : fallback;
}

/** The domain of a sender such as `a@b.example` or `Name <a@b.example>`, for the Message-ID. */
export function domainOf(from: string): string {
  const address = /<([^<>]*)>\s*$/.exec(from)?.[1] ?? from;
  const at = address.lastIndexOf('@');
  const domain = at < 0 ? '' : address.slice(at + 1).trim();
  return /^[A-Za-z0-9.-]+$/.test(domain) ? domain : 'localhost';
}

/**
 * Permanent rejections of the recipient (5xx to RCPT TO, or an address nodemailer refuses before
 * connecting) fail the message; any other permanent reply (sender or content refused) fails it
 * too, as PROVIDER_ERROR; connection, TLS, authentication, timeout and 4xx failures are retryable.
 */
export function smtpErrorToProviderError(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err;
  const e = (err ?? {}) as NodemailerError;
  const detail = e.message || String(err);
  if (e.code === 'EENVELOPE' && e.command === 'RCPT TO' && e.permanent === true) {
    return new ProviderError(PROVIDER_ERROR_CODES.INVALID_RECIPIENT, `The mail server rejected the recipient: ${detail}`, false);
  }
  if (e.code === 'EENVELOPE' && e.command === 'API') {
    // Refused by nodemailer before connecting (no or malformed address): retrying cannot help.
    const code = /recipient/i.test(detail) ? PROVIDER_ERROR_CODES.INVALID_RECIPIENT : PROVIDER_ERROR_CODES.PROVIDER_ERROR;
    return new ProviderError(code, detail, false);
  }
  // Credentials and TLS are ours to fix, not the message's: keep retrying while someone does.
  const ours = e.code === 'EAUTH' || e.code === 'ENOAUTH' || e.code === 'ETLS' || e.code === 'ECONFIG';
  if (e.permanent === true && !ours) {
    return new ProviderError(PROVIDER_ERROR_CODES.PROVIDER_ERROR, `The mail server refused the message: ${detail}`, false);
  }
  return new ProviderError(PROVIDER_ERROR_CODES.PROVIDER_ERROR, `Sending the email failed: ${detail}`, true);
}
