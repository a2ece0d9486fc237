/** Messaging's settings (`config.messaging`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function messagingConfig(env: EnvReader) {
  return {
    /** Live email over SMTP (`smtp://user:pass@host:port`); unset → live email is CHANNEL_UNAVAILABLE. */
    smtpUrl: env.string('SMTP_URL', 'live-mode email over SMTP (`smtp://user:pass@host:port`); unset → live email answers 503 CHANNEL_UNAVAILABLE'),
    /** Development and benches only: live mode sends through the sandbox providers too. */
    liveSandbox: env.bool('MESSAGING_LIVE_SANDBOX', false, 'development and benches: live-mode sends go to the sandbox providers (no carrier, no SMTP server is called)'),
    /** Delivery attempts for retryable provider errors before a message fails. */
    sendAttempts: env.int('MESSAGING_SEND_ATTEMPTS', 4, 'delivery attempts for retryable provider errors before a message fails', { min: 1 }),
    /** Seconds between delivery attempts (pg-boss backs off exponentially from here). */
    retryDelaySeconds: env.int('MESSAGING_RETRY_DELAY_SECONDS', 5, 'seconds before the first delivery retry (then exponential backoff)'),
    /** Parallel deliveries per worker process. */
    deliveryConcurrency: env.int('MESSAGING_DELIVERY_CONCURRENCY', 8, 'parallel deliveries per worker process', { min: 1 }),
    carriers: {
      operatorOrg: env.string('MESSAGING_OPERATOR_ORG', 'the platform operator\'s organization id: its admins configure `shared` carrier connectors and routes, which carry every organization\'s live messages after its own routes (unset: no shared routes)'),
      sendTimeoutMs: env.int('MESSAGING_CARRIER_SEND_TIMEOUT_MS', 10_000, 'how long a carrier connector tries to submit a message (waiting for its window, pace or a reconnect) before the send fails over to the next route', { min: 100 }),
      /** Where the HTTP carrier SDKs (and WhatsApp Cloud's plain fetch) send their requests instead of the vendor's hosts (a regional proxy; a local fake in tests). */
      apiUrls: {
        twilio: env.string('MESSAGING_TWILIO_API_URL', 'base URL the Twilio connectors call instead of https://api.twilio.com (a proxy; tests point it at a local fake)'),
        telnyx: env.string('MESSAGING_TELNYX_API_URL', 'base URL the Telnyx connectors call instead of https://api.telnyx.com/v2'),
        vonage: env.string('MESSAGING_VONAGE_API_URL', 'base URL the Vonage connectors call instead of https://api.nexmo.com (Messages API)'),
        whatsapp_cloud: env.string('MESSAGING_WHATSAPP_API_URL', 'base URL the WhatsApp Cloud API connectors call instead of https://graph.facebook.com (Graph API)'),
      },
      reconnectMaxMs: env.int('MESSAGING_CARRIER_RECONNECT_MAX_MS', 30_000, 'longest wait between a carrier connector\'s reconnection attempts (the wait doubles from 0.5 s)', { min: 100 }),
    },
    sandbox: {
      sendLatencyMs: env.int('SANDBOX_SEND_LATENCY_MS', 40, 'sandbox providers: time a send takes (see Messaging, Sandbox)'),
      deliveredAfterMs: env.int('SANDBOX_DELIVERED_AFTER_MS', 1500, 'sandbox providers: sent → delivered after this'),
      readAfterMs: env.int('SANDBOX_READ_AFTER_MS', 3000, 'sandbox WhatsApp/RCS/Viber: delivered → read after this'),
      templateReviewMs: env.int('SANDBOX_TEMPLATE_REVIEW_MS', 10_000, 'sandbox WhatsApp template review time'),
    },
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { messaging: ReturnType<typeof messagingConfig> }
}
