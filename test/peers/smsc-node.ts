/**
 * A test SMSC on the `smpp` package's server mode, run as its own process by the tests
 * (test/helpers/smsc.ts). It speaks the same line protocol as test/peers/smsc.pl (Net::SMPP):
 *
 *   argv: <port (0 = any)> <system_id> <password> [quiet]
 *   stdout, one JSON object per line:
 *     {"event":"listening","port":N}
 *     {"event":"bind","type":"transceiver","ok":true}
 *     {"event":"submit","id":"…","from":"…","to":"…","data_coding":N,"esm_class":N,"registered_delivery":N,
 *      "short_message":"<hex>","sar":[ref,total,seq] or null}          (accepted submits only)
 *     {"event":"refused","to":"…","status":N}                             (answered with an error)
 *     {"event":"held","to":"…"}                                           (received, never answered)
 *     {"event":"deliver_resp","kind":"receipt"|"mo","status":N}
 *     {"event":"enquire_link"}
 *   stdin, one JSON object per line:
 *     {"cmd":"throttle","count":N,"status":88}       the next N submits are answered with status (88 ESME_RTHROTTLED, 20 ESME_RMSGQFUL)
 *     {"cmd":"refuse","to":"447…","status":11}        submits to this destination are refused with status
 *     {"cmd":"receipt_stat","to":"447…","stat":"UNDELIV"}  receipts for this destination report stat (default DELIVRD)
 *     {"cmd":"receipt_delay","ms":N}                  receipts go N ms after the submit (default 20)
 *     {"cmd":"hold","count":N}                        the next N submits are never answered; after the Nth every connection is dropped
 *     {"cmd":"mo","from":"…","to":"…","text":"…","ucs2":bool,"segments":N}   a mobile-originated message (split with the 8-bit UDH when segments > 1)
 *     {"cmd":"stats"}                                  answers {"event":"stats","submits":N,"receipts":N,"receipts_acked":N,"receipts_refused":N}
 *
 * Receipts carry the text format and the receipted_message_id and message_state TLVs; a receipt
 * answered with an error status is sent again 300 ms later (at most 20 times). Nothing here comes
 * from the adapter under test: it is written from SMPP 3.4 on the package's PDU layer.
 */
import { createInterface } from 'node:readline';
import smpp, { type PDU, type Session } from 'smpp';

const [portArg = '0', systemId = 'test', password = 'secret', mode = ''] = process.argv.slice(2);
/** `quiet` (benches): no line per submit or receipt; `{"cmd":"stats"}` answers the counts. */
const quiet = mode === 'quiet';
const stats = { submits: 0, receipts: 0, receipts_acked: 0, receipts_refused: 0 };
const out = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

// Read short messages as raw octets (the package would decode them to text).
const raw = { encode: (v: unknown) => v, decode: (v: unknown) => v };
const submitParam = smpp.commands.submit_sm?.params?.short_message;
if (submitParam) submitParam.filter = raw;

const STATES: Record<string, number> = { DELIVRD: 2, EXPIRED: 3, DELETED: 4, UNDELIV: 5, ACCEPTD: 6, UNKNOWN: 7, REJECTD: 8 };
let throttle = { count: 0, status: 0x58 };
let hold = 0;
let receiptDelay = 20;
const refusals = new Map<string, number>();
const receiptStats = new Map<string, string>();
const receivers: Session[] = [];
let nextId = 1;
let nextRef = 1;
const pending: { pdu: PDU; tries: number; kind: string }[] = [];

function deliver(pdu: PDU, kind: string, tries = 0): void {
  const session = receivers.find((s) => !s.socket.destroyed);
  if (!session) {
    pending.push({ pdu, tries, kind });
    return;
  }
  pdu.sequence_number = 0;
  session.send(pdu, (resp: PDU) => {
    if (kind === 'receipt') {
      if (resp.command_status === 0) stats.receipts_acked++;
      else stats.receipts_refused++;
    }
    if (!quiet) out({ event: 'deliver_resp', kind, status: resp.command_status });
    if (resp.command_status !== 0 && tries < 20) setTimeout(() => deliver(pdu, kind, tries + 1), 300);
  });
}

function yymmddhhmm(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}`;
}

function receipt(id: string, pdu: PDU): void {
  stats.receipts++;
  const stat = receiptStats.get(String(pdu.destination_addr)) ?? 'DELIVRD';
  const now = yymmddhhmm(new Date());
  const text = `id:${id} sub:001 dlvrd:${stat === 'DELIVRD' ? '001' : '000'} submit date:${now} done date:${now} stat:${stat} err:${stat === 'DELIVRD' ? '000' : '005'} text:`;
  deliver(new smpp.PDU('deliver_sm', {
    source_addr_ton: pdu.dest_addr_ton, source_addr_npi: pdu.dest_addr_npi, source_addr: pdu.destination_addr,
    dest_addr_ton: pdu.source_addr_ton, dest_addr_npi: pdu.source_addr_npi, destination_addr: pdu.source_addr,
    esm_class: 0x04, data_coding: 0, short_message: Buffer.from(text, 'ascii'),
    receipted_message_id: id, message_state: STATES[stat] ?? 7,
  }), 'receipt');
}

function onSubmit(session: Session, pdu: PDU): void {
  const to = String(pdu.destination_addr);
  if (hold > 0) {
    hold -= 1;
    out({ event: 'held', to });
    if (hold === 0) setTimeout(() => { for (const s of server.sessions.slice()) s.destroy(); }, 50);
    return;
  }
  if (throttle.count > 0) {
    throttle.count -= 1;
    out({ event: 'refused', to, status: throttle.status });
    session.send(pdu.response({ command_status: throttle.status }));
    return;
  }
  const refusal = refusals.get(to);
  if (refusal !== undefined) {
    out({ event: 'refused', to, status: refusal });
    session.send(pdu.response({ command_status: refusal }));
    return;
  }
  const id = `N${String(nextId++).padStart(8, '0')}`;
  stats.submits++;
  if (quiet) {
    session.send(pdu.response({ message_id: id }));
    if (Number(pdu.registered_delivery) & 1) setTimeout(() => receipt(id, pdu), receiptDelay);
    return;
  }
  const sm = pdu.short_message as Buffer;
  const sar = pdu.sar_msg_ref_num !== undefined ? [pdu.sar_msg_ref_num, pdu.sar_total_segments, pdu.sar_segment_seqnum] : null;
  out({
    event: 'submit', id, from: pdu.source_addr, to, data_coding: pdu.data_coding, esm_class: pdu.esm_class,
    registered_delivery: pdu.registered_delivery, short_message: sm.toString('hex'), sar,
  });
  session.send(pdu.response({ message_id: id }));
  if (Number(pdu.registered_delivery) & 1) setTimeout(() => receipt(id, pdu), receiptDelay);
}

const server = smpp.createServer({}, (session: Session) => {
  session.on('error', () => {});
  const bind = (type: string, receives: boolean) => (pdu: PDU) => {
    const ok = pdu.system_id === systemId && pdu.password === password;
    session.send(pdu.response({ command_status: ok ? 0 : 0x0e, system_id: 'NODESMSC' }));
    out({ event: 'bind', type, ok });
    if (!ok) {
      setTimeout(() => session.close(), 20);
      return;
    }
    if (receives) {
      receivers.push(session);
      for (const p of pending.splice(0)) deliver(p.pdu, p.kind, p.tries);
    }
  };
  session.on('bind_transceiver', bind('transceiver', true));
  session.on('bind_transmitter', bind('transmitter', false));
  session.on('bind_receiver', bind('receiver', true));
  session.on('submit_sm', (pdu: PDU) => onSubmit(session, pdu));
  session.on('enquire_link', (pdu: PDU) => {
    session.send(pdu.response());
    out({ event: 'enquire_link' });
  });
  session.on('unbind', (pdu: PDU) => {
    session.send(pdu.response());
    session.close();
  });
  session.on('close', () => {
    const i = receivers.indexOf(session);
    if (i >= 0) receivers.splice(i, 1);
  });
});

function mo(cmd: { from: string; to: string; text: string; ucs2?: boolean; segments?: number }): void {
  const bytes = cmd.ucs2 ? Buffer.from(cmd.text, 'utf16le').swap16() : Buffer.from(cmd.text, 'latin1');
  const segments = Math.max(1, cmd.segments ?? 1);
  const size = Math.ceil(bytes.length / segments / (cmd.ucs2 ? 2 : 1)) * (cmd.ucs2 ? 2 : 1);
  const ref = nextRef++ & 0xff;
  for (let i = 0; i < segments; i++) {
    const chunk = bytes.subarray(i * size, (i + 1) * size);
    const udh = segments > 1 ? Buffer.from([5, 0, 3, ref, segments, i + 1]) : Buffer.alloc(0);
    deliver(new smpp.PDU('deliver_sm', {
      source_addr_ton: 1, source_addr_npi: 1, source_addr: cmd.from.replace(/^\+/, ''),
      dest_addr_ton: 1, dest_addr_npi: 1, destination_addr: cmd.to.replace(/^\+/, ''),
      esm_class: segments > 1 ? 0x40 : 0, data_coding: cmd.ucs2 ? 8 : 3, short_message: Buffer.concat([udh, chunk]),
    }), 'mo');
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  const cmd = JSON.parse(line) as Record<string, any>;
  switch (cmd.cmd) {
    case 'throttle': throttle = { count: cmd.count, status: cmd.status ?? 0x58 }; break;
    case 'refuse': refusals.set(String(cmd.to).replace(/^\+/, ''), cmd.status); break;
    case 'receipt_stat': receiptStats.set(String(cmd.to).replace(/^\+/, ''), cmd.stat); break;
    case 'receipt_delay': receiptDelay = cmd.ms; break;
    case 'hold': hold = cmd.count; break;
    case 'mo': mo(cmd as any); break;
    case 'stats': out({ event: 'stats', ...stats }); break;
  }
  out({ event: 'ok', cmd: cmd.cmd });
});
process.stdin.on('end', () => process.exit(0));

server.listen(Number(portArg), '127.0.0.1', () => out({ event: 'listening', port: (server.address() as { port: number }).port }));
