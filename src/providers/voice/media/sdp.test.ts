import { describe, expect, it } from 'vitest';
import { acceptAnswer, answerOffer, buildSdp, parseCrypto, parseSdp, SdpError } from './sdp.ts';
import { newSrtpKey } from './srtp.ts';

const offer = (m: string, extra: string[] = []) => ['v=0', 'o=- 1 1 IN IP4 192.0.2.1', 's=-', 'c=IN IP4 192.0.2.1', 't=0 0', m, ...extra, ''].join('\r\n');

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof SdpError) return e.code;
    throw e;
  }
  return undefined;
}

describe('SDP', () => {
  it('parses an audio stream: address, port, formats, rtpmap (static types without one), telephone-event, rtcp, direction', () => {
    const sdp = parseSdp(offer('m=audio 4000 RTP/AVP 8 0 101', ['a=rtpmap:101 telephone-event/8000', 'a=fmtp:101 0-15', 'a=rtcp:4005 IN IP4 192.0.2.9', 'a=sendonly']));
    const m = sdp.media[0]!;
    expect(m).toMatchObject({ type: 'audio', port: 4000, proto: 'RTP/AVP', formats: [8, 0, 101], address: '192.0.2.1', direction: 'sendonly', rtcp: { port: 4005, address: '192.0.2.9' } });
    expect(m.rtpmap.get(101)).toEqual({ encoding: 'telephone-event', clock: 8000, channels: 1 });
    expect(m.fmtp.get(101)).toBe('0-15');
  });

  it('builds an offer in the order given, with telephone-event, ptime and rtcp; encrypted: RTP/SAVP and one crypto line per key', () => {
    const plain = buildSdp({ address: '10.0.0.5', port: 20000, codecs: ['PCMA', 'PCMU'], sessionId: '7' });
    expect(plain).toContain('m=audio 20000 RTP/AVP 8 0 101\r\n');
    expect(plain).toContain('a=rtpmap:8 PCMA/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16');
    expect(plain).toContain('c=IN IP4 10.0.0.5');
    expect(plain).toContain('a=rtcp:20001');
    const keys = [newSrtpKey('AES_CM_128_HMAC_SHA1_80'), newSrtpKey('AES_CM_128_HMAC_SHA1_32')];
    const secure = parseSdp(buildSdp({ address: '10.0.0.5', port: 20000, codecs: ['PCMU'], sessionId: '7', keys }));
    expect(secure.media[0]!.proto).toBe('RTP/SAVP');
    expect(secure.media[0]!.crypto.map((c) => [c.tag, c.suite, c.key?.key.equals(keys[c.tag - 1]!.key)])).toEqual([[1, 'AES_CM_128_HMAC_SHA1_80', true], [2, 'AES_CM_128_HMAC_SHA1_32', true]]);
  });

  it('answers an offer with the first of its codecs the service speaks, keeping its payload types', () => {
    const { agreement, answer } = answerOffer(offer('m=audio 4000 RTP/AVP 18 8 0 96', ['a=rtpmap:18 G729/8000', 'a=rtpmap:96 telephone-event/8000']), { codecs: ['PCMU', 'PCMA'], requireSrtp: false, newKey: newSrtpKey });
    expect(agreement).toMatchObject({ codec: 'PCMA', payloadType: 8, telephoneEvent: 96, remote: { host: '192.0.2.1', port: 4000 }, remoteRtcp: { host: '192.0.2.1', port: 4001 } });
    const text = answer({ address: '10.0.0.5', port: 20002, sessionId: '9' });
    expect(text).toContain('m=audio 20002 RTP/AVP 8 96\r\n');
    expect(text).toContain('a=rtpmap:96 telephone-event/8000');
  });

  it('answers a dynamic payload type for PCMU with that type', () => {
    const { agreement, answer } = answerOffer(offer('m=audio 4000 RTP/AVP 112', ['a=rtpmap:112 PCMU/8000']), { codecs: ['PCMU'], requireSrtp: false, newKey: newSrtpKey });
    expect(agreement.payloadType).toBe(112);
    const text = answer({ address: '10.0.0.5', port: 20002, sessionId: '9' });
    expect(text).toContain('m=audio 20002 RTP/AVP 112\r\n');
    expect(text).toContain('a=rtpmap:112 PCMU/8000');
  });

  it('a codec mismatch is MEDIA_CODEC_MISMATCH naming both sides', () => {
    const run = () => answerOffer(offer('m=audio 4000 RTP/AVP 18 9', ['a=rtpmap:18 G729/8000']), { codecs: ['PCMU', 'PCMA'], requireSrtp: false, newKey: newSrtpKey });
    expect(codeOf(run)).toBe('MEDIA_CODEC_MISMATCH');
    expect(() => run()).toThrow(/offers G729, G722, the service speaks PCMU, PCMA/);
    expect(codeOf(() => answerOffer(offer('m=video 4000 RTP/AVP 96'), { codecs: ['PCMU'], requireSrtp: false, newKey: newSrtpKey }))).toBe('MEDIA_CODEC_MISMATCH');
  });

  it('an encrypted trunk refuses plain RTP; an RTP/SAVP offer is answered with our key under its tag', () => {
    expect(codeOf(() => answerOffer(offer('m=audio 4000 RTP/AVP 0'), { codecs: ['PCMU'], requireSrtp: true, newKey: newSrtpKey }))).toBe('MEDIA_SRTP_REQUIRED');
    const theirs = newSrtpKey('AES_CM_128_HMAC_SHA1_32');
    const inline = Buffer.concat([theirs.key, theirs.salt]).toString('base64');
    const { agreement, localKey, answer } = answerOffer(offer('m=audio 4000 RTP/SAVP 0', [`a=crypto:3 AES_CM_128_HMAC_SHA1_32 inline:${inline}`]), { codecs: ['PCMU'], requireSrtp: true, newKey: newSrtpKey });
    expect(agreement.remoteCrypto?.key?.salt.equals(theirs.salt)).toBe(true);
    const text = parseSdp(answer({ address: '10.0.0.5', port: 20002, sessionId: '9' }));
    expect(text.media[0]!.proto).toBe('RTP/SAVP');
    expect(text.media[0]!.crypto).toHaveLength(1);
    expect(text.media[0]!.crypto[0]).toMatchObject({ tag: 3, suite: 'AES_CM_128_HMAC_SHA1_32' });
    expect(text.media[0]!.crypto[0]!.key!.key.equals(localKey!.key)).toBe(true);
  });

  it('skips crypto lines it cannot use (unknown suite, MKI, wrong key length) and takes the next', () => {
    expect(parseCrypto('1 AES_256_CM_HMAC_SHA1_80 inline:' + Buffer.alloc(46).toString('base64'))?.key).toBeUndefined();
    expect(parseCrypto('1 AES_CM_128_HMAC_SHA1_80 inline:' + Buffer.alloc(30).toString('base64') + '|2^20|1:4')?.key).toBeUndefined();
    expect(parseCrypto('1 AES_CM_128_HMAC_SHA1_80 inline:' + Buffer.alloc(20).toString('base64'))?.key).toBeUndefined();
    const k = newSrtpKey('AES_CM_128_HMAC_SHA1_80');
    const good = `a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:${Buffer.concat([k.key, k.salt]).toString('base64')}|2^31`;
    const { agreement } = answerOffer(offer('m=audio 4000 RTP/SAVP 0', ['a=crypto:1 F8_128_HMAC_SHA1_80 inline:' + Buffer.alloc(30).toString('base64'), good]), { codecs: ['PCMU'], requireSrtp: true, newKey: newSrtpKey });
    expect(agreement.remoteCrypto?.tag).toBe(2);
  });

  it('accepts an answer: the codec it chose among ours, its crypto line matched to our key by tag', () => {
    const keys = [newSrtpKey('AES_CM_128_HMAC_SHA1_80'), newSrtpKey('AES_CM_128_HMAC_SHA1_32')];
    const theirs = newSrtpKey('AES_CM_128_HMAC_SHA1_32');
    const a = acceptAnswer(offer('m=audio 5000 RTP/SAVP 8 101', ['a=rtpmap:101 telephone-event/8000', `a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:${Buffer.concat([theirs.key, theirs.salt]).toString('base64')}`]), { codecs: ['PCMU', 'PCMA'], keys });
    expect(a).toMatchObject({ codec: 'PCMA', payloadType: 8, telephoneEvent: 101, remote: { host: '192.0.2.1', port: 5000 } });
    expect(a.localKey).toBe(keys[1]);
    expect(a.remoteCrypto?.key?.key.equals(theirs.key)).toBe(true);
  });

  it('an answer that rejects the stream, picks no codec of ours, or drops encryption fails with its code', () => {
    expect(codeOf(() => acceptAnswer(offer('m=audio 0 RTP/AVP 0'), { codecs: ['PCMU'], keys: undefined }))).toBe('MEDIA_CODEC_MISMATCH');
    expect(codeOf(() => acceptAnswer(offer('m=audio 5000 RTP/AVP 8'), { codecs: ['PCMU'], keys: undefined }))).toBe('MEDIA_CODEC_MISMATCH');
    expect(codeOf(() => acceptAnswer(offer('m=audio 5000 RTP/AVP 0'), { codecs: ['PCMU'], keys: [newSrtpKey('AES_CM_128_HMAC_SHA1_80')] }))).toBe('MEDIA_SRTP_REQUIRED');
    expect(codeOf(() => parseSdp('hello'))).toBe('MEDIA_SDP_INVALID');
    expect(codeOf(() => acceptAnswer(['v=0', 's=-', 'm=audio 5000 RTP/AVP 0', ''].join('\r\n'), { codecs: ['PCMU'], keys: undefined }))).toBe('MEDIA_SDP_INVALID');
  });
});
