/**
 * Which messaging provider serves a (mode, channel). Test mode always gets the sandbox of the
 * channel. Live mode gets a real adapter where one is configured: today only email, over SMTP when
 * an SMTP URL is set. `forMode` answers undefined otherwise and the messaging service turns that
 * into CHANNEL_UNAVAILABLE (503). A new carrier is one more entry in the `live` map below (or in
 * `opts.live`), nothing else changes.
 */
import { SandboxMessagingProvider, SandboxTemplateReviewer, type SandboxDelays } from './sandbox.ts';
import type { SendStore } from './sendStore.ts';
import type { Mode } from '../../platform/db/tenant.ts';
import { SmtpEmailProvider } from './smtp.ts';
import { SpanKind, tracingEnabled, withSpan } from '../../platform/tracing.ts';
import {
  CHANNELS,
  type Channel,
  type MessagingProvider,
  type ReportSink,
  type TemplateDecisionSink,
  type TemplateReviewer,
} from './types.ts';

export type ProviderMode = Mode;

export type MessagingProvidersOptions = {
  /** `smtp://user:pass@host:port` or `smtps://…`; enables live email. */
  smtpUrl?: string | undefined;
  /** Where the sandbox records accepted sends (PgSendStore in the app). */
  store: SendStore;
  /** Where the sandbox's later status reports go. */
  reports: ReportSink;
  delays: SandboxDelays;
  /** Where template decisions go, and how long the sandbox review takes. */
  decisions: TemplateDecisionSink;
  reviewAfterMs: number;
  /** Development and benches: live mode uses the sandbox providers (no carrier is called). */
  liveSandbox?: boolean;
  /** Further live providers by channel (a carrier adapter, or a fake in tests); they win over SMTP. */
  live?: Partial<Record<Channel, MessagingProvider>>;
};

export type MessagingProviders = {
  forMode(mode: ProviderMode, channel: Channel): MessagingProvider | undefined;
  /**
   * Template review. There is no live reviewer (no live WhatsApp carrier either), so the sandbox
   * reviews templates of both modes until one exists.
   */
  reviewer: TemplateReviewer;
  /** Closes live connections (the SMTP transport). */
  close(): Promise<void>;
};

type Closable = { close(): Promise<void> | void };

/** With tracing on, each send is a CLIENT span naming the provider and channel (never the recipient or content). */
function traced(provider: MessagingProvider): MessagingProvider {
  const attributes = { 'app.provider': provider.name, 'app.channel': provider.channel };
  return {
    name: provider.name,
    channel: provider.channel,
    send: (message) => withSpan(`provider.send ${provider.name}`, { kind: SpanKind.CLIENT, attributes }, () => provider.send(message)),
    supports: (to) => provider.supports(to),
  };
}

function isClosable(p: MessagingProvider): p is MessagingProvider & Closable {
  return typeof (p as Partial<Closable>).close === 'function';
}

export function createMessagingProviders(opts: MessagingProvidersOptions): MessagingProviders {
  const sandbox = new Map<Channel, MessagingProvider>(
    CHANNELS.map((channel) => [channel, new SandboxMessagingProvider({ channel, store: opts.store, reports: opts.reports, delays: opts.delays })]),
  );

  // The extension point: one live adapter per channel.
  const live = new Map<Channel, MessagingProvider>();
  for (const [channel, provider] of Object.entries(opts.live ?? {}) as [Channel, MessagingProvider | undefined][]) {
    if (provider) live.set(channel, provider);
  }
  if (opts.smtpUrl && !live.has('email')) live.set('email', new SmtpEmailProvider(opts.smtpUrl));
  for (const [channel, provider] of live) {
    if (provider.channel !== channel) throw new Error(`The live ${provider.name} provider serves ${provider.channel}, not ${channel}`);
  }

  const reviewer = new SandboxTemplateReviewer({ decisions: opts.decisions, reviewAfterMs: opts.reviewAfterMs, echoSubmission: true });

  const tracedProviders = new WeakMap<MessagingProvider, MessagingProvider>();
  return {
    forMode(mode, channel) {
      const provider = mode === 'test' || opts.liveSandbox ? sandbox.get(channel) : live.get(channel);
      if (!provider || !tracingEnabled()) return provider;
      let wrapped = tracedProviders.get(provider);
      if (!wrapped) tracedProviders.set(provider, (wrapped = traced(provider)));
      return wrapped;
    },
    reviewer,
    async close() {
      const closing = [...new Set(live.values())].filter(isClosable).map(async (p) => p.close());
      await Promise.allSettled(closing);
    },
  };
}
