import { describe, expect, it } from 'vitest';
import { addressFor, assignVariant, personalize, quietUntil, timezoneFor } from './campaigns.rules.ts';

const contact = { first_name: 'Ada', last_name: null, phone: '+14155550100', email: 'Ada@Example.com', country: 'GB', metadata: { plan: 'gold', timezone: 'Asia/Tokyo' } };

describe('campaign rules', () => {
  it('picks the channel address, normalized, or says why not', () => {
    expect(addressFor('sms', contact)).toEqual({ address: '+14155550100' });
    expect(addressFor('email', contact)).toEqual({ address: 'ada@example.com' });
    expect(addressFor('sms', { phone: null, email: 'x@y.z' })).toEqual({ skip: 'no_address' });
    expect(addressFor('sms', { phone: '12', email: null })).toEqual({ skip: 'invalid' });
  });

  it('assigns variants by weight, the same way every time', () => {
    const variants = [{ name: 'A', weight: 3 }, { name: 'B', weight: 1 }];
    const counts = { A: 0, B: 0 } as Record<string, number>;
    for (let i = 0; i < 4000; i++) counts[assignVariant(`con_${i}`, variants)!]! += 1;
    expect(counts.A! / 4000).toBeGreaterThan(0.7);
    expect(counts.A! / 4000).toBeLessThan(0.8);
    expect(assignVariant('con_1', variants)).toBe(assignVariant('con_1', variants));
    expect(assignVariant('con_1', [])).toBeNull();
  });

  it('personalizes with contact fields and leaves template variables alone', () => {
    expect(personalize('Hi {{contact.first_name}}{{contact.last_name}}, {{contact.metadata.plan}} {{code}}', contact)).toBe('Hi Ada, gold {{code}}');
  });

  it('finds the recipient zone and the end of a quiet window, across midnight', () => {
    expect(timezoneFor(contact, null)).toBe('Asia/Tokyo');
    expect(timezoneFor({ country: 'US', metadata: {} }, null)).toBe('America/New_York');
    expect(timezoneFor({ country: null, metadata: {} }, 'Europe/Paris')).toBe('Europe/Paris');
    const quiet = { start: '21:00', end: '08:00' };
    // 23:30 UTC is inside; the window ends 08:00 UTC next day.
    expect(quietUntil(new Date('2026-03-02T23:30:00Z'), quiet, 'UTC')?.toISOString()).toBe('2026-03-03T08:00:00.000Z');
    expect(quietUntil(new Date('2026-03-02T12:00:00Z'), quiet, 'UTC')).toBeNull();
    // 12:00 UTC is 21:00 in Tokyo: quiet until 08:00 Tokyo = 23:00 UTC.
    expect(quietUntil(new Date('2026-03-02T12:00:00Z'), quiet, 'Asia/Tokyo')?.toISOString()).toBe('2026-03-02T23:00:00.000Z');
  });
});
