import { describe, expect, it } from 'vitest';
import { createMessagingProviders, type MessagingProvidersOptions } from './registry.ts';
import { SandboxMessagingProvider, SandboxTemplateReviewer } from './sandbox.ts';
import { MemorySendStore } from './sendStore.ts';
import { SmtpEmailProvider } from './smtp.ts';
import { CHANNELS, type MessagingProvider, type StatusReport, type TemplateDecision } from './types.ts';

function options(overrides: Partial<MessagingProvidersOptions> = {}) {
  const reports: { report: Omit<StatusReport, 'at'>; delayMs: number }[] = [];
  const decisions: { decision: TemplateDecision; delayMs: number }[] = [];
  const opts: MessagingProvidersOptions = {
    store: new MemorySendStore(),
    reports: { schedule: async (report, delayMs) => { reports.push({ report, delayMs }); } },
    decisions: { schedule: async (decision, delayMs) => { decisions.push({ decision, delayMs }); } },
    delays: { sendLatencyMs: 0, deliveredAfterMs: 100, readAfterMs: 200 },
    reviewAfterMs: 300,
    ...overrides,
  };
  return { opts, reports, decisions };
}

describe('createMessagingProviders', () => {
  it('test mode always gets the sandbox of the channel', async () => {
    const providers = createMessagingProviders(options({ smtpUrl: 'smtp://127.0.0.1:2525' }).opts);
    for (const channel of CHANNELS) {
      const p = providers.forMode('test', channel);
      expect(p).toBeInstanceOf(SandboxMessagingProvider);
      expect(p!.channel).toBe(channel);
      expect(providers.forMode('test', channel)).toBe(p);
    }
    await providers.close();
  });

  it('live mode has no provider without an SMTP URL (the service answers CHANNEL_UNAVAILABLE)', async () => {
    const providers = createMessagingProviders(options().opts);
    for (const channel of CHANNELS) expect(providers.forMode('live', channel)).toBeUndefined();
    await providers.close();
  });

  it('live email goes over SMTP when an SMTP URL is set; other live channels stay unavailable', async () => {
    const providers = createMessagingProviders(options({ smtpUrl: 'smtps://user:pass@smtp.example.com:465' }).opts);
    expect(providers.forMode('live', 'email')).toBeInstanceOf(SmtpEmailProvider);
    for (const channel of CHANNELS.filter((c) => c !== 'email')) expect(providers.forMode('live', channel)).toBeUndefined();
    await providers.close();
  });

  it('takes further live providers by channel and closes those that can be closed', async () => {
    let closed = 0;
    const sms: MessagingProvider & { close(): Promise<void> } = {
      name: 'carrier', channel: 'sms',
      send: async () => ({ providerMessageId: 'C1' }),
      supports: async () => true,
      close: async () => { closed += 1; },
    };
    const providers = createMessagingProviders(options({ live: { sms } }).opts);
    expect(providers.forMode('live', 'sms')).toBe(sms);
    expect(providers.forMode('test', 'sms')).toBeInstanceOf(SandboxMessagingProvider);
    await providers.close();
    expect(closed).toBe(1);
  });

  it('refuses a live provider registered under another channel', () => {
    const wrong: MessagingProvider = { name: 'x', channel: 'sms', send: async () => ({ providerMessageId: 'x' }), supports: async () => true };
    expect(() => createMessagingProviders(options({ live: { whatsapp: wrong } }).opts)).toThrow(/serves sms/);
  });

  it('refuses a malformed SMTP URL at start-up', () => {
    expect(() => createMessagingProviders(options({ smtpUrl: 'mailto:ops@example.com' }).opts)).toThrow(/smtp:\/\//);
  });

  it('wires the sandbox to the given store, sink and delays, and exposes the template reviewer', async () => {
    const { opts, reports, decisions } = options();
    const providers = createMessagingProviders(opts);
    const sent = await providers.forMode('test', 'viber')!.send({ id: 'msg_r1', channel: 'viber', from: 'Acme', to: ['+14155550123'], body: 'hi', content: {} });
    expect(reports.map((r) => [r.report.status, r.delayMs, r.report.providerMessageId])).toEqual([
      ['delivered', 100, sent.providerMessageId],
      ['read', 300, sent.providerMessageId],
    ]);
    expect(providers.reviewer).toBeInstanceOf(SandboxTemplateReviewer);
    await providers.reviewer.submit({ id: 'tpl_1', channel: 'whatsapp', name: 'reject_me', content: 'x', category: null, language: null });
    expect(decisions).toEqual([{ decision: expect.objectContaining({ templateId: 'tpl_1', status: 'rejected' }), delayMs: 300 }]);
    await providers.close();
  });
});
