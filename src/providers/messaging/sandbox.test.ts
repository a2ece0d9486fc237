import { describe, expect, it } from 'vitest';
import { SANDBOX_MAGIC, SandboxMessagingProvider, SandboxTemplateReviewer, type SandboxDelays } from './sandbox.ts';
import { MemorySendStore } from './sendStore.ts';
import {
  CHANNELS,
  CHANNELS_WITH_READS,
  ProviderError,
  type Channel,
  type OutboundMessage,
  type ReportSink,
  type StatusReport,
  type TemplateDecision,
  type TemplateDecisionSink,
  type TemplateSubmission,
} from './types.ts';

const DELAYS: SandboxDelays = { sendLatencyMs: 0, deliveredAfterMs: 1500, readAfterMs: 4000 };
const PHONE_CHANNELS = CHANNELS.filter((c) => c !== 'email');

type Scheduled = { report: Omit<StatusReport, 'at'>; delayMs: number };

class RecordingReports implements ReportSink {
  readonly scheduled: Scheduled[] = [];
  async schedule(report: Omit<StatusReport, 'at'>, delayMs: number): Promise<void> {
    this.scheduled.push({ report, delayMs });
  }
}

let seq = 0;
function message(channel: Channel, to: string[], overrides: Partial<OutboundMessage> = {}): OutboundMessage {
  seq += 1;
  const email = channel === 'email';
  return {
    id: `msg_test${String(seq).padStart(6, '0')}`,
    channel,
    from: email ? 'Acme <noreply@acme.test>' : '+15550001111',
    to,
    body: 'Hello',
    content: email ? { subject: 'Hi', html: '<p>Hello</p>' } : {},
    ...overrides,
  };
}

function ordinaryRecipient(channel: Channel): string {
  return channel === 'email' ? 'someone@example.com' : '+14155550123';
}

function setup(channel: Channel, delays: SandboxDelays = DELAYS) {
  const store = new MemorySendStore();
  const reports = new RecordingReports();
  const provider = new SandboxMessagingProvider({ channel, store, reports, delays });
  return { store, reports, provider };
}

async function providerError(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('SandboxMessagingProvider', () => {
  it('documents the magic values', () => {
    expect(SANDBOX_MAGIC).toMatchObject({
      invalidRecipient: '+15005550001',
      providerError: '+15005550002',
      noRcs: '+15005550003',
      noReports: '+15005550004',
      bounceEmail: 'bounce@sandbox.test',
      rejectTemplatePrefix: 'reject_',
      rejectTemplateWord: 'REJECTME',
    });
  });

  describe.each(CHANNELS)('on %s', (channel) => {
    it('an ordinary recipient is delivered (and read where the channel reports reads) at the configured delays', async () => {
      const { provider, reports, store } = setup(channel);
      expect(provider.name).toBe('sandbox');
      expect(provider.channel).toBe(channel);
      const msg = message(channel, [ordinaryRecipient(channel)]);
      const result = await provider.send(msg);
      expect(result.providerMessageId).toMatch(/^SBX[0-9a-f]{24}$/);
      const base = { messageId: msg.id, providerMessageId: result.providerMessageId };
      const expected: Scheduled[] = [{ report: { ...base, status: 'delivered' }, delayMs: DELAYS.deliveredAfterMs }];
      if (CHANNELS_WITH_READS.has(channel)) {
        expected.push({ report: { ...base, status: 'read' }, delayMs: DELAYS.deliveredAfterMs + DELAYS.readAfterMs });
      }
      expect(reports.scheduled).toEqual(expected);
      expect(store.entries).toEqual([
        expect.objectContaining({ idempotencyKey: msg.id, provider: 'sandbox', channel, providerMessageId: result.providerMessageId, recipients: msg.to }),
      ]);
      expect(await provider.supports(ordinaryRecipient(channel))).toBe(true);
    });

    it(`${SANDBOX_MAGIC.invalidRecipient} fails with INVALID_RECIPIENT, not retryable, and is not recorded`, async () => {
      const { provider, reports, store } = setup(channel);
      const err = await providerError(provider.send(message(channel, [SANDBOX_MAGIC.invalidRecipient])));
      expect(err.code).toBe('INVALID_RECIPIENT');
      expect(err.retryable).toBe(false);
      expect(reports.scheduled).toEqual([]);
      expect(store.entries).toEqual([]);
    });

    it(`${SANDBOX_MAGIC.providerError} fails with PROVIDER_ERROR, retryable, every time, and is not recorded`, async () => {
      const { provider, reports, store } = setup(channel);
      const msg = message(channel, [SANDBOX_MAGIC.providerError]);
      for (let attempt = 0; attempt < 3; attempt++) {
        const err = await providerError(provider.send(msg));
        expect(err.code).toBe('PROVIDER_ERROR');
        expect(err.retryable).toBe(true);
      }
      expect(reports.scheduled).toEqual([]);
      expect(store.entries).toEqual([]);
    });

    it(`${SANDBOX_MAGIC.noReports} is accepted and then never reported, also when sent twice`, async () => {
      const { provider, reports, store } = setup(channel);
      const msg = message(channel, [SANDBOX_MAGIC.noReports]);
      const first = await provider.send(msg);
      const second = await provider.send(msg);
      expect(first.providerMessageId).toMatch(/^SBX[0-9a-f]{24}$/);
      expect(second).toEqual(first);
      expect(reports.scheduled).toEqual([]);
      expect(store.entries).toHaveLength(1);
    });

    it('a repeated send with the same id returns the first provider id, sends nothing more and schedules the same reports again', async () => {
      const { provider, reports, store } = setup(channel);
      const msg = message(channel, [ordinaryRecipient(channel)]);
      const first = await provider.send(msg);
      const before = [...reports.scheduled];
      expect(before.length).toBeGreaterThan(0);
      const again = await provider.send(msg);
      expect(again).toEqual(first);
      expect(store.entries).toHaveLength(1);
      // The same reports (same provider message id): a crash before the first scheduling loses none.
      expect(reports.scheduled).toEqual([...before, ...before]);
    });

    it('two concurrent first sends of the same id send once; both schedule the one provider id\'s reports', async () => {
      const { provider, reports, store } = setup(channel);
      const msg = message(channel, [ordinaryRecipient(channel)]);
      const [a, b] = await Promise.all([provider.send(msg), provider.send(msg)]);
      expect(a).toEqual(b);
      const delivered = reports.scheduled.filter((s) => s.report.status === 'delivered');
      expect(delivered).toHaveLength(2);
      expect(new Set(delivered.map((s) => s.report.providerMessageId))).toEqual(new Set([a.providerMessageId]));
      expect(store.entries).toHaveLength(1);
    });

    it('different messages get different provider ids', async () => {
      const { provider } = setup(channel);
      const a = await provider.send(message(channel, [ordinaryRecipient(channel)]));
      const b = await provider.send(message(channel, [ordinaryRecipient(channel)]));
      expect(a.providerMessageId).not.toBe(b.providerMessageId);
    });
  });

  describe(`${SANDBOX_MAGIC.noRcs} (no RCS)`, () => {
    it('is not supported on rcs and its rcs send fails with RCS_NOT_SUPPORTED, not retryable, unrecorded', async () => {
      const { provider, reports, store } = setup('rcs');
      expect(await provider.supports(SANDBOX_MAGIC.noRcs)).toBe(false);
      const err = await providerError(provider.send(message('rcs', [SANDBOX_MAGIC.noRcs])));
      expect(err.code).toBe('RCS_NOT_SUPPORTED');
      expect(err.retryable).toBe(false);
      expect(reports.scheduled).toEqual([]);
      expect(store.entries).toEqual([]);
    });

    it('every other magic number supports rcs', async () => {
      const { provider } = setup('rcs');
      for (const to of [SANDBOX_MAGIC.invalidRecipient, SANDBOX_MAGIC.providerError, SANDBOX_MAGIC.noReports, '+14155550123']) {
        expect(await provider.supports(to)).toBe(true);
      }
    });

    it.each(PHONE_CHANNELS.filter((c) => c !== 'rcs'))('is an ordinary number on %s', async (channel) => {
      const { provider, reports } = setup(channel);
      expect(await provider.supports(SANDBOX_MAGIC.noRcs)).toBe(true);
      const msg = message(channel, [SANDBOX_MAGIC.noRcs]);
      const { providerMessageId } = await provider.send(msg);
      expect(reports.scheduled[0]).toEqual({ report: { messageId: msg.id, providerMessageId, status: 'delivered' }, delayMs: DELAYS.deliveredAfterMs });
      expect(reports.scheduled).toHaveLength(CHANNELS_WITH_READS.has(channel) ? 2 : 1);
    });
  });

  describe(`email to ${SANDBOX_MAGIC.bounceEmail}`, () => {
    it('is accepted, then fails with BOUNCED after deliveredAfterMs and is never read', async () => {
      const { provider, reports, store } = setup('email');
      const msg = message('email', [SANDBOX_MAGIC.bounceEmail]);
      const { providerMessageId } = await provider.send(msg);
      expect(providerMessageId).toMatch(/^SBX[0-9a-f]{24}$/);
      expect(reports.scheduled).toEqual([
        { report: { messageId: msg.id, providerMessageId, status: 'failed', errorCode: 'BOUNCED' }, delayMs: DELAYS.deliveredAfterMs },
      ]);
      expect(store.entries).toHaveLength(1);
    });

    it('bounces when any of several recipients is the bounce address, compared case-insensitively', async () => {
      const { provider, reports } = setup('email');
      const msg = message('email', ['ok@example.com', 'Bounce@Sandbox.TEST']);
      await provider.send(msg);
      expect(reports.scheduled.map((s) => [s.report.status, s.report.errorCode])).toEqual([['failed', 'BOUNCED']]);
    });

    it('sent twice: sent once, the same bounce report scheduled again (it changes nothing the second time)', async () => {
      const { provider, reports, store } = setup('email');
      const msg = message('email', [SANDBOX_MAGIC.bounceEmail]);
      const a = await provider.send(msg);
      const b = await provider.send(msg);
      expect(b).toEqual(a);
      expect(store.entries).toHaveLength(1);
      expect(reports.scheduled.map((s) => [s.report.status, s.report.providerMessageId])).toEqual([['failed', a.providerMessageId], ['failed', a.providerMessageId]]);
    });
  });

  it('records the payload of the send', async () => {
    const { provider, store } = setup('email');
    const msg = message('email', ['a@example.com', 'b@example.com'], { content: { subject: 'S', text: 'T' }, body: 'T' });
    await provider.send(msg);
    expect(store.entries[0]).toMatchObject({
      recipients: ['a@example.com', 'b@example.com'],
      payload: { from: msg.from, body: 'T', content: { subject: 'S', text: 'T' } },
    });
  });

  it('waits sendLatencyMs before answering, failures included', async () => {
    const { provider } = setup('sms', { ...DELAYS, sendLatencyMs: 80 });
    let started = performance.now();
    await provider.send(message('sms', ['+14155550123']));
    expect(performance.now() - started).toBeGreaterThanOrEqual(70);
    started = performance.now();
    await providerError(provider.send(message('sms', [SANDBOX_MAGIC.invalidRecipient])));
    expect(performance.now() - started).toBeGreaterThanOrEqual(70);
  });

  it('passes the configured delays through to the report sink', async () => {
    const { provider, reports } = setup('whatsapp', { sendLatencyMs: 0, deliveredAfterMs: 0, readAfterMs: 250 });
    await provider.send(message('whatsapp', ['+14155550123']));
    expect(reports.scheduled.map((s) => [s.report.status, s.delayMs])).toEqual([['delivered', 0], ['read', 250]]);
  });

  it('refuses a message of another channel (a wiring bug, not a provider outcome)', async () => {
    const { provider } = setup('sms');
    await expect(provider.send(message('whatsapp', ['+14155550123']))).rejects.not.toBeInstanceOf(ProviderError);
  });

  it('refuses a message without recipients as INVALID_RECIPIENT', async () => {
    const { provider } = setup('sms');
    const err = await providerError(provider.send(message('sms', [])));
    expect([err.code, err.retryable]).toEqual(['INVALID_RECIPIENT', false]);
  });

  it('fails the send when scheduling a report fails; the retry does not send again but schedules the reports', async () => {
    // A crash (or a queue failure) between the claim and the scheduling loses no report (see the header of sandbox.ts).
    const store = new MemorySendStore();
    let fail = true;
    const scheduled: Scheduled[] = [];
    const reports: ReportSink = {
      async schedule(report, delayMs) {
        if (fail) throw new Error('queue down');
        scheduled.push({ report, delayMs });
      },
    };
    const provider = new SandboxMessagingProvider({ channel: 'sms', store, reports, delays: DELAYS });
    const msg = message('sms', ['+14155550123']);
    await expect(provider.send(msg)).rejects.toThrow('queue down');
    fail = false;
    const again = await provider.send(msg);
    expect(again.providerMessageId).toBe(store.entries[0]!.providerMessageId);
    expect(store.entries).toHaveLength(1);
    expect(scheduled.map((s) => [s.report.status, s.report.providerMessageId])).toEqual([['delivered', again.providerMessageId]]);
  });
});

describe('SandboxTemplateReviewer', () => {
  class RecordingDecisions implements TemplateDecisionSink {
    readonly scheduled: { decision: TemplateDecision; delayMs: number }[] = [];
    async schedule(decision: TemplateDecision, delayMs: number): Promise<void> {
      this.scheduled.push({ decision, delayMs });
    }
  }

  function template(overrides: Partial<TemplateSubmission>): TemplateSubmission {
    return { id: 'tpl_1', channel: 'whatsapp', name: 'order_update', content: 'Your order {{1}} has shipped', category: 'UTILITY', language: 'en', ...overrides };
  }

  async function decide(t: TemplateSubmission, reviewAfterMs = 3000) {
    const decisions = new RecordingDecisions();
    await new SandboxTemplateReviewer({ decisions, reviewAfterMs }).submit(t);
    expect(decisions.scheduled).toHaveLength(1);
    return decisions.scheduled[0]!;
  }

  it('approves an ordinary template after reviewAfterMs', async () => {
    expect(await decide(template({ id: 'tpl_ok' }), 1234)).toEqual({ decision: { templateId: 'tpl_ok', status: 'approved' }, delayMs: 1234 });
  });

  it('rejects a template whose name starts with reject_, with a reason', async () => {
    const { decision, delayMs } = await decide(template({ id: 'tpl_r', name: 'reject_promo' }));
    expect(decision).toMatchObject({ templateId: 'tpl_r', status: 'rejected' });
    expect(decision.reason).toMatch(/reject_/);
    expect(delayMs).toBe(3000);
  });

  it('rejects a template whose content contains the word REJECTME, with a reason', async () => {
    const { decision } = await decide(template({ content: 'Hello {{1}}, REJECTME please.' }));
    expect(decision).toMatchObject({ status: 'rejected' });
    expect(decision.reason).toMatch(/REJECTME/);
  });

  it.each([
    ['a name with reject_ inside', { name: 'do_not_reject_me' }],
    ['a name starting with Reject_', { name: 'Reject_promo' }],
    ['REJECTME inside a longer word', { content: 'NOREJECTMENT here' }],
    ['rejectme in lower case', { content: 'please rejectme' }],
  ])('approves %s', async (_label, overrides) => {
    expect((await decide(template(overrides))).decision.status).toBe('approved');
  });

  it('applies to every channel', async () => {
    for (const channel of CHANNELS) {
      expect((await decide(template({ channel, name: 'reject_x' }))).decision.status).toBe('rejected');
      expect((await decide(template({ channel }))).decision.status).toBe('approved');
    }
  });
});
