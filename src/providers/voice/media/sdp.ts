/**
 * SDP (RFC 8866) for one audio stream, and the offer/answer model over it (RFC 3264): the
 * service's offer (PCMU/PCMA in the trunk's order, telephone-event for keys, SDES crypto lines when
 * the call is encrypted), its answer to a far end's offer, and what both sides agreed once the
 * answer is in. Only what a G.711 call needs is read; other lines are ignored.
 */
import { SRTP_SUITES, type SrtpKey, type SrtpSuite } from './srtp.ts';
import type { G711 } from './g711.ts';

export type Crypto = { tag: number; suite: string; key?: SrtpKey; raw: string };

export type SdpMedia = {
  type: string;
  port: number;
  proto: string;
  formats: number[];
  /** The media-level c= line, else the session's. */
  address: string | undefined;
  rtpmap: Map<number, { encoding: string; clock: number; channels: number }>;
  fmtp: Map<number, string>;
  direction: 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';
  crypto: Crypto[];
  rtcp: { port: number; address?: string } | undefined;
  ptime: number | undefined;
};

export type Sdp = { origin: string | undefined; address: string | undefined; media: SdpMedia[] };

export class SdpError extends Error {
  /** What went wrong, as the call's error code says it. */
  readonly code: 'MEDIA_SDP_INVALID' | 'MEDIA_CODEC_MISMATCH' | 'MEDIA_SRTP_REQUIRED' | 'MEDIA_STREAM_REJECTED';
  constructor(code: SdpError['code'], message: string) {
    super(message);
    this.name = 'SdpError';
    this.code = code;
  }
}

/** The static payload types of RFC 3551 that a call may use without an rtpmap. */
const STATIC: Record<number, { encoding: string; clock: number; channels: number }> = {
  0: { encoding: 'PCMU', clock: 8000, channels: 1 },
  8: { encoding: 'PCMA', clock: 8000, channels: 1 },
  9: { encoding: 'G722', clock: 8000, channels: 1 },
};

export function parseSdp(text: string): Sdp {
  const sdp: Sdp = { origin: undefined, address: undefined, media: [] };
  let media: SdpMedia | undefined;
  let sessionDirection: SdpMedia['direction'] = 'sendrecv';
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  if (!lines[0]?.startsWith('v=')) throw new SdpError('MEDIA_SDP_INVALID', 'the SDP does not start with v=');
  for (const line of lines) {
    const type = line[0];
    const value = line.slice(2);
    if (line[1] !== '=') throw new SdpError('MEDIA_SDP_INVALID', `not an SDP line: ${line.slice(0, 40)}`);
    if (type === 'o') sdp.origin = value;
    else if (type === 'c') {
      const address = connection(value);
      if (media) media.address = address;
      else sdp.address = address;
    } else if (type === 'm') {
      const [kind, port, proto, ...formats] = value.split(/\s+/);
      const portNumber = Number(port?.split('/')[0]);
      if (!kind || !proto || !Number.isInteger(portNumber) || portNumber < 0 || portNumber > 65535) throw new SdpError('MEDIA_SDP_INVALID', `bad m= line: ${value}`);
      media = {
        type: kind, port: portNumber, proto, formats: formats.map(Number).filter((n) => Number.isInteger(n) && n >= 0 && n < 128),
        address: sdp.address, rtpmap: new Map(), fmtp: new Map(), direction: sessionDirection, crypto: [], rtcp: undefined, ptime: undefined,
      };
      sdp.media.push(media);
    } else if (type === 'a') {
      const colon = value.indexOf(':');
      const name = colon < 0 ? value : value.slice(0, colon);
      const arg = colon < 0 ? '' : value.slice(colon + 1);
      if (name === 'sendrecv' || name === 'sendonly' || name === 'recvonly' || name === 'inactive') {
        if (media) media.direction = name;
        else sessionDirection = name;
      }
      if (!media) continue;
      if (name === 'rtpmap') {
        const m = /^(\d+)\s+([^/\s]+)\/(\d+)(?:\/(\d+))?/.exec(arg);
        if (m) media.rtpmap.set(Number(m[1]), { encoding: m[2]!, clock: Number(m[3]), channels: m[4] ? Number(m[4]) : 1 });
      } else if (name === 'fmtp') {
        const m = /^(\d+)\s+(.*)$/.exec(arg);
        if (m) media.fmtp.set(Number(m[1]), m[2]!);
      } else if (name === 'crypto') {
        const c = parseCrypto(arg);
        if (c) media.crypto.push(c);
      } else if (name === 'rtcp') {
        const m = /^(\d+)(?:\s+IN\s+IP[46]\s+(\S+))?/i.exec(arg);
        if (m) media.rtcp = { port: Number(m[1]), address: m[2] };
      } else if (name === 'ptime') {
        media.ptime = Number(arg) || undefined;
      }
    }
  }
  return sdp;
}

function connection(value: string): string {
  const m = /^IN\s+IP[46]\s+([^/\s]+)/i.exec(value);
  if (!m) throw new SdpError('MEDIA_SDP_INVALID', `bad c= line: ${value}`);
  return m[1]!;
}

/** `a=crypto:<tag> <suite> inline:<base64 key||salt>[|lifetime][|MKI:length]` (RFC 4568 §9.1). */
export function parseCrypto(arg: string): Crypto | undefined {
  const m = /^(\d{1,9})\s+(\S+)\s+(\S+)/.exec(arg);
  if (!m) return undefined;
  const tag = Number(m[1]);
  const suite = m[2]!;
  const crypto: Crypto = { tag, suite, raw: arg };
  // One inline key, no MKI (our packets carry none), a lifetime we ignore.
  const params = m[3]!.split(';');
  if (params.length !== 1 || !params[0]!.startsWith('inline:')) return crypto;
  const [b64, ...extra] = params[0]!.slice(7).split('|');
  if (extra.some((e) => e.includes(':'))) return crypto;
  if (!(SRTP_SUITES as readonly string[]).includes(suite)) return crypto;
  const bytes = Buffer.from(b64 ?? '', 'base64');
  if (bytes.length !== 30) return crypto;
  crypto.key = { suite: suite as SrtpSuite, key: bytes.subarray(0, 16), salt: bytes.subarray(16, 30) };
  return crypto;
}

export function cryptoLine(tag: number, key: SrtpKey): string {
  return `a=crypto:${tag} ${key.suite} inline:${Buffer.concat([key.key, key.salt]).toString('base64')}`;
}

/** The codecs the engine speaks, by encoding name. */
export const AUDIO_CODECS: Record<G711, { pt: number; rtpmap: string }> = {
  PCMU: { pt: 0, rtpmap: 'PCMU/8000' },
  PCMA: { pt: 8, rtpmap: 'PCMA/8000' },
};
export const TELEPHONE_EVENT_PT = 101;

/** Our side of the exchange: where we receive, which codecs in order, and our SRTP keys when encrypted. */
export type LocalMedia = {
  address: string;
  port: number;
  codecs: readonly G711[];
  /** SRTP keys we offer (one per suite), or the one we answer with; undefined: plain RTP. */
  keys?: readonly SrtpKey[];
  sessionId: string;
  /** Our answer to a far end's `a=crypto` (keeps its tag). */
  cryptoTag?: number;
  /** The answer's telephone-event payload type (the offer's), or the offer's own. */
  telephoneEvent?: number | null;
};

export function buildSdp(local: LocalMedia): string {
  const family = local.address.includes(':') ? 'IP6' : 'IP4';
  const formats = local.codecs.map((c) => AUDIO_CODECS[c].pt);
  const te = local.telephoneEvent === undefined ? TELEPHONE_EVENT_PT : local.telephoneEvent;
  if (te !== null) formats.push(te);
  const proto = local.keys ? 'RTP/SAVP' : 'RTP/AVP';
  return [
    'v=0', `o=- ${local.sessionId} ${local.sessionId} IN ${family} ${local.address}`, 's=-', `c=IN ${family} ${local.address}`, 't=0 0',
    `m=audio ${local.port} ${proto} ${formats.join(' ')}`,
    ...local.codecs.map((c) => `a=rtpmap:${AUDIO_CODECS[c].pt} ${AUDIO_CODECS[c].rtpmap}`),
    ...(te !== null ? [`a=rtpmap:${te} telephone-event/8000`, `a=fmtp:${te} 0-16`] : []),
    'a=ptime:20', 'a=sendrecv', `a=rtcp:${local.port + 1}`,
    ...(local.keys ?? []).map((k, i) => cryptoLine(local.cryptoTag ?? i + 1, k)),
    '',
  ].join('\r\n');
}

/** What both sides agreed: the far end's addresses, the codec and its payload type, keys, SRTP. */
export type Agreement = {
  remote: { host: string; port: number };
  remoteRtcp: { host: string; port: number };
  codec: G711;
  payloadType: number;
  telephoneEvent: number | undefined;
  /** The far end's key (what it sends with) and the suite's tag. */
  remoteCrypto: Crypto | undefined;
  direction: SdpMedia['direction'];
};

function encodingOf(m: SdpMedia, pt: number): { encoding: string; clock: number; channels: number } | undefined {
  return m.rtpmap.get(pt) ?? STATIC[pt];
}

function audio(sdp: Sdp): SdpMedia {
  const m = sdp.media.find((x) => x.type === 'audio');
  if (!m) throw new SdpError('MEDIA_CODEC_MISMATCH', 'the far end offers no audio stream');
  return m;
}

function addresses(m: SdpMedia): Pick<Agreement, 'remote' | 'remoteRtcp'> {
  if (!m.address) throw new SdpError('MEDIA_SDP_INVALID', 'the SDP has no connection address (c=)');
  return { remote: { host: m.address, port: m.port }, remoteRtcp: { host: m.rtcp?.address ?? m.address, port: m.rtcp?.port ?? m.port + 1 } };
}

function telephoneEventOf(m: SdpMedia): number | undefined {
  for (const pt of m.formats) {
    const e = m.rtpmap.get(pt);
    if (e && e.encoding.toLowerCase() === 'telephone-event' && e.clock === 8000) return pt;
  }
  return undefined;
}

const SECURE = /^(RTP\/SAVP|RTP\/SAVPF)$/i;
const PLAIN = /^(RTP\/AVP|RTP\/AVPF)$/i;

/**
 * Our answer to a far end's offer (RFC 3264 §6): the first of its formats we speak (its order of
 * preference), its telephone-event type, and — when the offer is RTP/SAVP, or the call must be
 * encrypted — the first crypto line we support, answered with our own key for that suite.
 */
export function answerOffer(offerText: string, ours: { codecs: readonly G711[]; requireSrtp: boolean; newKey: (suite: SrtpSuite) => SrtpKey }): { agreement: Agreement; localKey: SrtpKey | undefined; answer: (local: Omit<LocalMedia, 'codecs' | 'keys' | 'cryptoTag' | 'telephoneEvent'>) => string } {
  const offer = parseSdp(offerText);
  const m = audio(offer);
  if (m.port === 0) throw new SdpError('MEDIA_STREAM_REJECTED', 'the far end offers its audio stream with port 0');
  const secure = SECURE.test(m.proto);
  if (!secure && !PLAIN.test(m.proto)) throw new SdpError('MEDIA_CODEC_MISMATCH', `unsupported media transport ${m.proto} (RTP/AVP or RTP/SAVP with SDES keys only)`);
  if (ours.requireSrtp && !secure) throw new SdpError('MEDIA_SRTP_REQUIRED', 'the trunk requires SRTP (tls_srtp) but the far end offers plain RTP');
  const codec = pickCodec(m, ours.codecs);
  let remoteCrypto: Crypto | undefined;
  if (secure) {
    remoteCrypto = m.crypto.find((c) => c.key);
    if (!remoteCrypto) throw new SdpError('MEDIA_SRTP_REQUIRED', `no usable SDES crypto line in the offer (supported: ${SRTP_SUITES.join(', ')}; inline key, no MKI)`);
  }
  const te = telephoneEventOf(m);
  const agreement: Agreement = { ...addresses(m), codec: codec.codec, payloadType: codec.pt, telephoneEvent: te, remoteCrypto, direction: m.direction };
  const key = remoteCrypto ? ours.newKey(remoteCrypto.key!.suite) : undefined;
  return {
    agreement, localKey: key,
    answer: (local) => buildAnswer({ ...local, codecs: [codec.codec], keys: key ? [key] : undefined, cryptoTag: remoteCrypto?.tag, telephoneEvent: te ?? null }, codec.pt),
  };
}

/** The answer's m= line keeps the offer's payload type for the codec (it may be dynamic). */
function buildAnswer(local: LocalMedia, pt: number): string {
  const text = buildSdp(local);
  const standard = AUDIO_CODECS[local.codecs[0]!].pt;
  if (pt === standard) return text;
  return text.replace(new RegExp(`^(m=audio \\d+ \\S+ )${standard}\\b`, 'm'), `$1${pt}`).replace(`a=rtpmap:${standard} `, `a=rtpmap:${pt} `);
}

function pickCodec(m: SdpMedia, ours: readonly G711[]): { codec: G711; pt: number } {
  for (const pt of m.formats) {
    const e = encodingOf(m, pt);
    if (!e || e.clock !== 8000 || e.channels !== 1) continue;
    const name = e.encoding.toUpperCase() as G711;
    if (ours.includes(name)) return { codec: name, pt };
  }
  const offered = m.formats.map((pt) => encodingOf(m, pt)?.encoding ?? String(pt)).join(', ');
  throw new SdpError('MEDIA_CODEC_MISMATCH', `no common codec: the far end offers ${offered || 'none'}, the service speaks ${ours.join(', ')}`);
}

/**
 * What the far end's answer to our offer agreed (RFC 3264 §7): the first format of its answer that
 * we offered, its telephone-event type, and the crypto line it chose among ours (by tag) with its key.
 */
export function acceptAnswer(answerText: string, offered: { codecs: readonly G711[]; keys: readonly SrtpKey[] | undefined }): Agreement & { localKey: SrtpKey | undefined } {
  const answer = parseSdp(answerText);
  const m = audio(answer);
  if (m.port === 0) throw new SdpError('MEDIA_CODEC_MISMATCH', `the far end rejected the audio stream (port 0): none of ${offered.codecs.join(', ')} is acceptable`);
  const secure = SECURE.test(m.proto);
  let remoteCrypto: Crypto | undefined;
  let localKey: SrtpKey | undefined;
  if (offered.keys) {
    if (!secure) throw new SdpError('MEDIA_SRTP_REQUIRED', `the far end answered ${m.proto} to an encrypted (RTP/SAVP) offer`);
    remoteCrypto = m.crypto.find((c) => c.key && c.tag >= 1 && c.tag <= offered.keys!.length && offered.keys![c.tag - 1]!.suite === c.suite);
    if (!remoteCrypto) throw new SdpError('MEDIA_SRTP_REQUIRED', 'the far end answered no crypto line matching ours');
    localKey = offered.keys[remoteCrypto.tag - 1];
  } else if (secure) {
    throw new SdpError('MEDIA_SDP_INVALID', 'the far end answered RTP/SAVP to a plain RTP offer');
  }
  const codec = pickCodec(m, offered.codecs);
  return { ...addresses(m), codec: codec.codec, payloadType: codec.pt, telephoneEvent: telephoneEventOf(m), remoteCrypto, direction: m.direction, localKey };
}
