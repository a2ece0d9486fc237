/**
 * DTMF as RTP events (RFC 4733 §2.3): the 4-byte event payload, the packets that send one key,
 * and a receiver that turns a stream of event packets into keys (each key once, whatever the
 * sender's retransmissions of its end packet).
 */

export const DTMF_KEYS = '0123456789*#ABCD';

export type DtmfEvent = { event: number; end: boolean; volume: number; duration: number };

export function encodeDtmfPayload(e: DtmfEvent): Buffer {
  const b = Buffer.alloc(4);
  b[0] = e.event;
  b[1] = (e.end ? 0x80 : 0) | (e.volume & 0x3f);
  b.writeUInt16BE(Math.min(0xffff, e.duration), 2);
  return b;
}

export function parseDtmfPayload(b: Buffer): DtmfEvent | undefined {
  if (b.length < 4) return undefined;
  return { event: b[0]!, end: (b[1]! & 0x80) !== 0, volume: b[1]! & 0x3f, duration: b.readUInt16BE(2) };
}

export function keyOf(event: number): string | undefined {
  return DTMF_KEYS[event];
}

/** One packet of a key being sent: its payload, whether it carries the marker, and whether it is the end. */
export type DtmfStep = { payload: Buffer; marker: boolean; end: boolean };

/**
 * The packets of one key (RFC 4733 §2.5.1): one every frame while it lasts (the first with the
 * marker, the duration growing), then the end packet three times. All carry the key's start
 * timestamp, which the caller sets.
 */
export function dtmfSteps(key: string, durationMs = 100, frameSamples = 160, rate = 8000): DtmfStep[] {
  const event = DTMF_KEYS.indexOf(key.toUpperCase());
  if (event < 0 || key.length !== 1) throw new RangeError(`not a DTMF key: ${JSON.stringify(key)}`);
  const frames = Math.max(1, Math.round((durationMs * rate) / 1000 / frameSamples));
  const steps: DtmfStep[] = [];
  for (let i = 1; i <= frames; i++) {
    const end = i === frames;
    const payload = encodeDtmfPayload({ event, end, volume: 10, duration: i * frameSamples });
    steps.push({ payload, marker: i === 1, end });
  }
  const last = steps[steps.length - 1]!;
  steps.push({ ...last, marker: false }, { ...last, marker: false });
  return steps;
}

/**
 * Keys from received event packets: a key is reported on the first packet of its event (a new
 * timestamp), so a lost start still reports it from a later packet or its end; packets of an event
 * already reported (more of its duration, the end and its retransmissions) report nothing.
 */
export class DtmfReceiver {
  #lastTimestamp: number | undefined;
  #lastEvent = -1;

  receive(timestamp: number, payload: Buffer): string | undefined {
    const e = parseDtmfPayload(payload);
    if (!e) return undefined;
    const key = keyOf(e.event);
    if (!key) return undefined;
    if (timestamp === this.#lastTimestamp && e.event === this.#lastEvent) return undefined;
    this.#lastTimestamp = timestamp;
    this.#lastEvent = e.event;
    return key;
  }
}
