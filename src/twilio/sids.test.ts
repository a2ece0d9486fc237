import { describe, expect, it } from 'vitest';
import { newId } from '../platform/ids.ts';
import { accountSid, fromSid, parseAccountSid, toSid } from './sids.ts';
import { parseBasic } from './auth.ts';
import { rfc2822 } from './wire.ts';

describe('Twilio SIDs', () => {
  it('map native ids to prefixed hex and back, stably', () => {
    for (let i = 0; i < 200; i++) {
      const id = newId('msg', Date.now() + i * 7_919);
      const sid = toSid(id);
      expect(sid).toMatch(/^SM[0-9a-f]{32}$/);
      expect(toSid(id)).toBe(sid);
      expect(fromSid(sid, 'msg')).toBe(id);
    }
    const call = newId('call');
    expect(toSid(call)).toMatch(/^CA/);
    expect(fromSid(toSid(call), 'call')).toBe(call);
  });

  it('refuse a SID of another kind or shape', () => {
    const sid = toSid(newId('msg'));
    expect(fromSid(sid, 'call')).toBeUndefined();
    expect(fromSid(sid.toLowerCase(), 'msg')).toBeUndefined();
    expect(fromSid(`${sid}0`, 'msg')).toBeUndefined();
    expect(fromSid(`SMf${sid.slice(3)}`, 'msg')).toBeUndefined();
    expect(() => toSid('usr_01jd000000000000000000000')).toThrow();
  });

  it('give an organization one account SID per mode', () => {
    const org = newId('org');
    const live = accountSid(org, 'live');
    const test = accountSid(org, 'test');
    expect(live).toMatch(/^AC[0-9a-f]{32}$/);
    expect(test).not.toBe(live);
    expect(parseAccountSid(live)).toEqual({ organizationId: org, mode: 'live' });
    expect(parseAccountSid(test)).toEqual({ organizationId: org, mode: 'test' });
    expect(parseAccountSid(toSid(newId('msg')))).toBeUndefined();
  });
});

describe('Twilio wire', () => {
  it('formats RFC 2822 dates in UTC', () => {
    expect(rfc2822(new Date('2015-07-30T20:12:31Z'))).toBe('Thu, 30 Jul 2015 20:12:31 +0000');
    expect(rfc2822(null)).toBeNull();
  });

  it('reads Basic credentials', () => {
    expect(parseBasic(`Basic ${Buffer.from('AC1:tok:en').toString('base64')}`)).toEqual({ username: 'AC1', password: 'tok:en' });
    expect(parseBasic('Bearer x')).toBeUndefined();
    expect(parseBasic(undefined)).toBeUndefined();
  });
});
