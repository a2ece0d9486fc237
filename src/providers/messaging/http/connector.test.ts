/** The HTTP carrier connectors' send-once rules (connector.ts), over the in-memory send record. */
import { describe, expect, it } from 'vitest';
import { MemoryCarrierSendStore } from '../carrierSends.ts';
import { PinnedToConnector, ProviderError, type ConnectorStatus, type OutboundMessage } from '../types.ts';
import { failureOf, HttpCarrierConnector, mediaKind, type MediaMessage } from './connector.ts';

class Scripted extends HttpCarrierConnector {
  readonly calls: MediaMessage[] = [];
  readonly answers: (() => Promise<string>)[];
  constructor(id: string, store: MemoryCarrierSendStore, answers: (() => Promise<string>)[], statuses: ConnectorStatus[] = []) {
    super(id, { store, events: { status: (_id, s) => statuses.push(s) }, callbacks: { status: 'https://x/status', inbound: 'https://x/inbound' } });
    this.answers = answers;
  }
  protected async submit(m: MediaMessage): Promise<string> {
    this.calls.push(m);
    return this.answers.shift()!();
  }
}

const msg = (id: string, content: Record<string, unknown> = {}): OutboundMessage => ({ id, channel: 'sms', from: '+15550001', to: ['+15550002'], body: 'hi', content });
const rejected = async (p: Promise<unknown>) => p.then(() => { throw new Error('resolved'); }, (e: unknown) => e as ProviderError);

describe('HttpCarrierConnector', () => {
  it('records the vendor id once: a repeated send answers it without calling the vendor', async () => {
    const store = new MemoryCarrierSendStore();
    const c = new Scripted('conn_a', store, [async () => 'SM1']);
    expect(await c.send(msg('m1', { media_urls: ['https://e.com/a.png'] }))).toEqual({ providerMessageId: 'SM1' });
    expect(await c.send(msg('m1'))).toEqual({ providerMessageId: 'SM1', provider: 'conn_a' });
    expect(c.calls).toHaveLength(1);
    expect(c.calls[0]!.mediaUrls).toEqual(['https://e.com/a.png']);
    expect(await store.messageOf('conn_a', 'SM1')).toBe('m1');
  });

  it('a 429/5xx took nothing: released, retryable, and another connector may send it', async () => {
    const store = new MemoryCarrierSendStore();
    const statuses: ConnectorStatus[] = [];
    const a = new Scripted('conn_a', store, [async () => { throw failureOf(503, 'TWILIO_20503', 'unavailable'); }], statuses);
    await a.start();
    const e = await rejected(a.send(msg('m2')));
    expect(e).toMatchObject({ code: 'TWILIO_20503', retryable: true });
    expect(statuses.at(-1)).toMatchObject({ state: 'degraded' });
    const b = new Scripted('conn_b', store, [async () => 'uuid-1']);
    expect(await b.send(msg('m2'))).toEqual({ providerMessageId: 'uuid-1' });
  });

  it('a permanent refusal fails the message with the vendor code and is never sent again', async () => {
    const store = new MemoryCarrierSendStore();
    const a = new Scripted('conn_a', store, [async () => { throw failureOf(400, 'TELNYX_40310', 'invalid to'); }]);
    expect(await rejected(a.send(msg('m3')))).toMatchObject({ code: 'TELNYX_40310', retryable: false });
    const b = new Scripted('conn_b', store, []);
    expect(await rejected(b.send(msg('m3')))).toMatchObject({ code: 'SEND_IN_DOUBT', retryable: false });
    expect(b.calls).toHaveLength(0);
  });

  it('a request that got no answer stays in doubt: no connector sends it again', async () => {
    const store = new MemoryCarrierSendStore();
    const a = new Scripted('conn_a', store, [async () => { throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }); }]);
    expect(await rejected(a.send(msg('m4')))).toMatchObject({ code: 'SEND_IN_DOUBT', retryable: false });
    const b = new Scripted('conn_b', store, []);
    expect(await rejected(b.send(msg('m4')))).toMatchObject({ code: 'SEND_IN_DOUBT' });
    expect(b.calls).toHaveLength(0);
  });

  it('a vendor never reached took nothing (connection refused): retryable, connector down', async () => {
    const store = new MemoryCarrierSendStore();
    const statuses: ConnectorStatus[] = [];
    const a = new Scripted('conn_a', store, [async () => { throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }); }], statuses);
    await a.start();
    expect(await rejected(a.send(msg('m5')))).toMatchObject({ code: 'CONNECTOR_UNAVAILABLE', retryable: true });
    expect(statuses.at(-1)).toMatchObject({ state: 'down', bound: 0 });
  });

  it('defers to the SMPP connector that sent part of the message', async () => {
    const store = new MemoryCarrierSendStore();
    await store.begin('m6', 'conn_smpp', 7);
    await store.partial('m6', 'conn_smpp', ['a', null]);
    const c = new Scripted('conn_a', store, []);
    expect(await rejected(c.send(msg('m6')))).toBeInstanceOf(PinnedToConnector);
  });

  it('names the MMS media kind by extension', () => {
    expect(['https://e.com/a.JPG', 'https://e.com/v.mp4?x=1', 'https://e.com/s.mp3', 'https://e.com/c.vcf', 'https://e.com/d.pdf'].map(mediaKind))
      .toEqual(['image', 'video', 'audio', 'vcard', 'file']);
  });
});
