/**
 * The SMPP adapter (src/providers/messaging/smpp) against two SMSCs no one here wrote the SMPP of,
 * each run as its own process: the `smpp` package's server mode and Perl's Net::SMPP. Every case
 * runs against both: bind, enquire_link, GSM-7 and concatenated UCS-2 submits (UDH and SAR),
 * receipts by text and TLVs, MO messages (a STOP, a concatenated UCS-2 one), throttling answers,
 * a permanent refusal, a connection dropped with submits in the window, a wrong password, the
 * transmitter + receiver mode and reconnection after the SMSC came back.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCarrierSendStore } from '../src/providers/messaging/carrierSends.ts';
import { SmppConnector, type SmppConnectorSettings } from '../src/providers/messaging/smpp/connector.ts';
import { decodeText, readSegment } from '../src/providers/messaging/smpp/encoding.ts';
import { encodeGsm7 } from '../src/providers/messaging/smpp/gsm7.ts';
import { ProviderError, type CarrierEvents, type ConnectorStatus, type OutboundMessage } from '../src/providers/messaging/types.ts';
import { eventually } from './helpers/assertions.ts';
import { SMSC_KINDS, startSmsc, type Smsc, type Submit } from './helpers/smsc.ts';

type Report = Parameters<CarrierEvents['report']>[0];
type Inbound = Parameters<CarrierEvents['inbound']>[0];

function recorder() {
  const reports: Report[] = [];
  const inbound: Inbound[] = [];
  const statuses: ConnectorStatus[] = [];
  /** Messages whose first report fails (the status path was not reachable). */
  const failFirstReport = new Set<string>();
  const events: CarrierEvents = {
    report: async (r) => {
      if (failFirstReport.delete(r.messageId)) throw new Error('the status path is not reachable');
      reports.push(r);
    },
    inbound: async (m) => {
      inbound.push(m);
      return m.to === '+447700900999' ? 'no_owner' : 'stored';
    },
    status: (_id, s) => { statuses.push(s); },
  };
  return { reports, inbound, statuses, events, failFirstReport };
}

let seq = 0;
function sms(to: string, body: string, from = '+447700900000'): OutboundMessage {
  return { id: `msg_test${String(++seq).padStart(6, '0')}`, channel: 'sms', from, to: [to], body, content: {} };
}

/** A submit's text (its UDH taken off). */
function textOf(s: Submit): string {
  const bytes = Buffer.from(s.short_message, 'hex');
  return decodeText(s.data_coding, readSegment(s.esm_class, bytes).payload);
}

describe.each(SMSC_KINDS)('SMPP connector against %s', (kind) => {
  let smsc: Smsc;
  const open: SmppConnector[] = [];
  const others: Smsc[] = [];

  beforeAll(async () => { smsc = await startSmsc(kind); });
  afterAll(async () => { await smsc?.close(); });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
    await Promise.all(others.splice(0).map((s) => s.close()));
  });

  async function connector(over: Partial<SmppConnectorSettings> = {}, target: Smsc = smsc) {
    const rec = recorder();
    const store = new MemoryCarrierSendStore();
    const c = new SmppConnector({
      id: `conn_${kind}_${++seq}`, host: '127.0.0.1', port: target.port, tls: false, systemId: target.systemId, password: target.password,
      systemType: '', bindMode: 'transceiver', binds: 1, window: 10, throughput: 200, concatenation: 'udh', enquireLinkSeconds: 30,
      requestReceipts: true, reconnectMaxMs: 1_000, ...over,
    }, { store, events: rec.events });
    open.push(c);
    await c.start();
    return { c, store, ...rec };
  }

  it('binds, submits GSM-7 and moves to delivered on the receipt', async () => {
    const { c, reports } = await connector();
    expect(c.status()).toMatchObject({ state: 'connected', bound: 1, binds: 1 });
    const message = sms('+447700900001', 'Hello {world} €5 @ home');
    const result = await c.send(message);
    const submit = await smsc.accepted(result.providerMessageId);
    expect(submit).toMatchObject({ from: '447700900000', to: '447700900001', data_coding: 0, esm_class: 0, registered_delivery: 1, sar: null });
    expect(Buffer.from(submit.short_message, 'hex')).toEqual(encodeGsm7('Hello {world} €5 @ home'));
    const report = await eventually('the receipt', () => reports.find((r) => r.messageId === message.id));
    expect(report).toMatchObject({ providerMessageId: result.providerMessageId, provider: c.name, status: 'delivered' });
  });

  it('answers a repeated send from its record and submits nothing more', async () => {
    const { c } = await connector();
    const message = sms('+447700900002', 'once');
    const first = await c.send(message);
    const again = await c.send(message);
    expect(again.providerMessageId).toBe(first.providerMessageId);
    await smsc.acceptedTo('447700900002', 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(smsc.submits().filter((s) => s.to === '447700900002')).toHaveLength(1);
  });

  it('splits a long UCS-2 body into UDH-concatenated segments, delivered once every segment is', async () => {
    const { c, reports } = await connector();
    const body = 'Merhaba dünya şğüçö '.repeat(8); // 160 characters, not GSM-7: 3 segments of ≤ 67
    const message = sms('+447700900003', body);
    const result = await c.send(message);
    const parts = await smsc.acceptedTo('447700900003', 3);
    expect(parts).toHaveLength(3);
    expect(parts[0]!.id).toBe(result.providerMessageId);
    const udh = parts.map((p) => Buffer.from(p.short_message, 'hex').subarray(0, 6));
    expect(new Set(udh.map((u) => u[3])).size).toBe(1);
    expect(udh.map((u) => [...u.subarray(0, 3), u[4], u[5]])).toEqual([[5, 0, 3, 3, 1], [5, 0, 3, 3, 2], [5, 0, 3, 3, 3]]);
    expect(parts.every((p) => p.data_coding === 8 && (p.esm_class & 0x40) === 0x40)).toBe(true);
    expect(parts.map(textOf).join('')).toBe(body);
    const report = await eventually('the receipt of the whole message', () => reports.find((r) => r.messageId === message.id));
    expect(report.status).toBe('delivered');
    expect(reports.filter((r) => r.messageId === message.id)).toHaveLength(1);
  });

  it('uses the SAR TLVs when configured', async () => {
    const { c } = await connector({ concatenation: 'sar' });
    const body = 'x'.repeat(200);
    await c.send(sms('+447700900004', body));
    const parts = await smsc.acceptedTo('447700900004', 2);
    expect(parts.map((p) => [p.sar?.[1], p.sar?.[2], p.esm_class])).toEqual([[2, 1, 0], [2, 2, 0]]);
    expect(parts[0]!.sar![0]).toBe(parts[1]!.sar![0]);
    expect(parts.map(textOf).join('')).toBe(body);
  });

  it('answers a receipt it could not apply with ESME_RX_T_APPN and applies the SMSC\'s repeat', async () => {
    const { c, reports, failFirstReport } = await connector();
    const message = sms('+447700900011', 'receipt repeated');
    failFirstReport.add(message.id);
    await c.send(message);
    const report = await eventually('the repeated receipt applied', () => reports.find((r) => r.messageId === message.id));
    expect(report.status).toBe('delivered');
    await smsc.waitFor('the refused receipt', (e) => e.find((x) => x.event === 'deliver_resp' && x.kind === 'receipt' && x.status === 0x64));
  });

  it('reports a failed receipt with DLR_<stat>', async () => {
    const { c, reports } = await connector();
    await smsc.command({ cmd: 'receipt_stat', to: '447700900005', stat: 'UNDELIV' });
    const message = sms('+447700900005', 'never arrives');
    await c.send(message);
    const report = await eventually('the failure receipt', () => reports.find((r) => r.messageId === message.id));
    expect(report).toMatchObject({ status: 'failed', errorCode: 'DLR_UNDELIV' });
  });

  it('hands mobile-originated messages over (a STOP, a concatenated UCS-2 one) and refuses one nobody owns', async () => {
    const { inbound } = await connector();
    await smsc.command({ cmd: 'mo', from: '+447700900100', to: '+447700900000', text: 'STOP' });
    const stop = await eventually('the STOP', () => inbound.find((m) => m.body === 'STOP'));
    expect(stop).toMatchObject({ from: '+447700900100', to: '+447700900000' });
    const long = 'Привет! Это длинное сообщение. '.repeat(4);
    await smsc.command({ cmd: 'mo', from: '+447700900101', to: '+447700900000', text: long, ucs2: true, segments: 2 });
    await eventually('the reassembled message', () => inbound.find((m) => m.body === long));
    await smsc.command({ cmd: 'mo', from: '+447700900102', to: '+447700900999', text: 'anyone?' });
    await smsc.waitFor('the refusal of an unowned MO', (e) => e.find((x) => x.event === 'deliver_resp' && x.kind === 'mo' && x.status === 0x65));
  });

  it('slows down on ESME_RTHROTTLED and ESME_RMSGQFUL and submits again without sending twice', async () => {
    const { c } = await connector();
    await smsc.command({ cmd: 'throttle', count: 2, status: 0x58 });
    const a = sms('+447700900006', 'throttled once or twice');
    await c.send(a);
    await smsc.command({ cmd: 'throttle', count: 1, status: 0x14 });
    await c.send(sms('+447700900006', 'queue full once'));
    const accepted = (await smsc.acceptedTo('447700900006', 2)).map(textOf);
    expect(accepted).toEqual(['throttled once or twice', 'queue full once']);
    expect(smsc.events.filter((e) => e.event === 'refused' && e.to === '447700900006').map((e) => e.status)).toEqual([0x58, 0x58, 0x14]);
    expect(c.status().state).toBe('degraded');
    expect(c.status().lastError).toMatch(/ESME_R(THROTTLED|MSGQFUL)/);
  });

  it('fails a permanently refused message with the command_status as error code', async () => {
    const { c, store } = await connector();
    await smsc.command({ cmd: 'refuse', to: '447700900007', status: 0x0b });
    const message = sms('+447700900007', 'bad destination');
    const failure = await c.send(message).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ProviderError);
    expect(failure).toMatchObject({ code: 'ESME_RINVDSTADR', retryable: false });
    expect(store.rows.get(message.id)?.state).toBe('failed');
  });

  it('loses nothing and sends nothing twice when the connection drops with submits in the window', async () => {
    const { c } = await connector({ window: 5, sendTimeoutMs: 15_000 });
    await smsc.command({ cmd: 'hold', count: 3 });
    const messages = Array.from({ length: 12 }, (_, i) => sms(`+4477009010${String(i).padStart(2, '0')}`, `windowed ${i}`));
    const results = await Promise.all(messages.map((m) => c.send(m)));
    expect(smsc.events.filter((e) => e.event === 'held')).toHaveLength(3);
    await Promise.all(results.map((r) => smsc.accepted(r.providerMessageId)));
    await new Promise((r) => setTimeout(r, 200));
    const accepted = smsc.submits().filter((s) => s.to.startsWith('4477009010'));
    expect(accepted.map(textOf).sort()).toEqual(messages.map((m) => m.body!).sort());
    expect(new Set(results.map((r) => r.providerMessageId)).size).toBe(12);
    await eventually('the bind back', () => (c.status().state === 'connected' ? true : undefined));
  });

  it('is down with a clear error on a wrong password, and refuses sends at once', async () => {
    const { c, statuses } = await connector({ password: 'wrong' });
    expect(c.status()).toMatchObject({ state: 'down', bound: 0 });
    expect(c.status().lastError).toMatch(/bind refused: ESME_RINVPASWD \(0x0000000E\)/);
    expect(statuses.at(-1)?.state).toBe('down');
    const failure = await c.send(sms('+447700900008', 'no')).catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'CONNECTOR_UNAVAILABLE', retryable: true });
  });

  it('binds transmitters and receivers separately, several of each', async () => {
    const before = smsc.events.filter((e) => e.event === 'bind' && e.ok).length;
    const { c, reports } = await connector({ bindMode: 'transmitter_receiver', binds: 2 });
    expect(c.status()).toMatchObject({ state: 'connected', bound: 4, binds: 4 });
    const binds = await smsc.waitFor('four binds', (e) => {
      const found = e.filter((x) => x.event === 'bind' && x.ok).slice(before).map((x) => x.type as string);
      return found.length >= 4 ? found : undefined;
    });
    expect(binds.filter((t) => t === 'transmitter')).toHaveLength(2);
    expect(binds.filter((t) => t === 'receiver')).toHaveLength(2);
    const message = sms('+447700900009', 'split roles');
    await c.send(message);
    await eventually('the receipt through a receiver', () => reports.find((r) => r.messageId === message.id));
  });

  it('keeps an idle link alive with enquire_link', async () => {
    const before = smsc.events.filter((e) => e.event === 'enquire_link').length;
    await connector({ enquireLinkSeconds: 0.2 });
    await smsc.waitFor('two enquire_link', (e) => (e.filter((x) => x.event === 'enquire_link').length >= before + 2 ? true : undefined));
  });

  it('reconnects with backoff once the SMSC is back, and sends again', async () => {
    const first = await startSmsc(kind);
    others.push(first);
    const { c } = await connector({}, first);
    expect(c.status().state).toBe('connected');
    await first.kill();
    await eventually('down', () => (c.status().state === 'down' ? true : undefined));
    const failure = await c.send(sms('+447700900010', 'while down')).catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'CONNECTOR_UNAVAILABLE', retryable: true });
    const second = await startSmsc(kind, { port: first.port });
    others.push(second);
    await eventually('connected again', () => (c.status().state === 'connected' ? true : undefined), 15_000);
    const result = await c.send(sms('+447700900010', 'after'));
    await second.accepted(result.providerMessageId);
  });
});
