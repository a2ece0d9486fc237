import { getCountries, getCountryCallingCode, Metadata, parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { describe, expect, it } from 'vitest';
import { capabilitiesOf, monthlyCostOf, regionOf } from './catalog.ts';
import { generateDigits, parseDigitPattern, Rng } from './patterns.ts';
import { containsPattern, describeNumber, SANDBOX_NUMBERS_MAGIC, SandboxNumbersProvider } from './sandbox.ts';
import type { AvailableNumber, NumberSearch, PortOrder } from './types.ts';

const provider = new SandboxNumbersProvider();
const nobody = async () => new Set<string>();
const search = (q: Partial<NumberSearch> & { country: string }) => provider.search({ limit: 20, ...q }, nobody);

const LIB_TYPES = { local: ['FIXED_LINE', 'FIXED_LINE_OR_MOBILE'], mobile: ['MOBILE'], toll_free: ['TOLL_FREE'] } as Record<string, string[]>;

/** Every listing must be a valid number of its country and type according to libphonenumber. */
function expectValid(listings: AvailableNumber[]): void {
  for (const n of listings) {
    const parsed = parsePhoneNumberFromString(n.number);
    expect(parsed?.isValid(), n.number).toBe(true);
    expect(parsed?.country, n.number).toBe(n.country);
    expect(LIB_TYPES[n.type], n.number).toContain(parsed?.getType());
    expect(n.number).toMatch(/^\+[1-9]\d{1,14}$/);
    expect(n.monthlyCost).toMatch(/^\d+\.\d{2}$/);
  }
}

describe('digit patterns', () => {
  it('parses every type pattern of every country and generates strings the pattern matches', () => {
    const metadata = new Metadata();
    const rng = new Rng('patterns');
    let checked = 0;
    for (const country of getCountries()) {
      metadata.selectNumberingPlan(country);
      const plan = metadata.numberingPlan as unknown as { type(t: string): { pattern(): string } | undefined };
      for (const type of ['FIXED_LINE', 'MOBILE', 'TOLL_FREE']) {
        const pattern = plan.type(type)?.pattern();
        if (!pattern) continue;
        const tree = parseDigitPattern(pattern);
        const full = new RegExp(`^(?:${pattern})$`);
        for (let k = 0; k < 5; k++) expect(generateDigits(tree, rng)).toMatch(full);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(500);
  });

  it('rejects syntax outside the subset', () => {
    expect(() => parseDigitPattern('1(?=2)')).toThrow(/unsupported/);
    expect(() => parseDigitPattern('[a-z]')).toThrow(/unsupported/);
  });

  it('the seeded generator repeats itself for the same seed only', () => {
    const a = new Rng('seed');
    const b = new Rng('seed');
    const c = new Rng('other');
    const seqA = Array.from({ length: 20 }, () => a.int(1000));
    expect(Array.from({ length: 20 }, () => b.int(1000))).toEqual(seqA);
    expect(Array.from({ length: 20 }, () => c.int(1000))).not.toEqual(seqA);
  });
});

describe('sandbox inventory search', () => {
  it('returns valid numbers of the requested country and type, with region, capabilities and price', async () => {
    for (const [country, type] of [['US', 'local'], ['US', 'toll_free'], ['GB', 'local'], ['GB', 'mobile'], ['GB', 'toll_free'], ['DE', 'mobile'], ['FR', 'local'], ['AU', 'mobile'], ['JP', 'toll_free']] as const) {
      const found = await search({ country, type, limit: 25 });
      expect(found.length, `${country} ${type}`).toBe(25);
      expect(new Set(found.map((n) => n.number)).size).toBe(25);
      expectValid(found);
      for (const n of found) {
        expect(n).toMatchObject({ country, type, currency: 'USD', monthlyCost: monthlyCostOf(country, type) });
        expect(n.region.length).toBeGreaterThan(0);
      }
    }
  });

  it('is stable: the same query gives the same numbers; a smaller limit gives a prefix', async () => {
    const first = await search({ country: 'US', type: 'local', limit: 30 });
    const again = await search({ country: 'US', type: 'local', limit: 30 });
    expect(again).toEqual(first);
    expect(await search({ country: 'US', type: 'local', limit: 7 })).toEqual(first.slice(0, 7));
    const other = await search({ country: 'US', type: 'local', areaCode: '212', limit: 30 });
    expect(other.map((n) => n.number)).not.toEqual(first.map((n) => n.number));
  });

  it('without a type, interleaves the types the country sells', async () => {
    const found = await search({ country: 'GB', limit: 30 });
    expect(new Set(found.map((n) => n.type))).toEqual(new Set(['local', 'mobile', 'toll_free']));
    expect(found.slice(0, 3).map((n) => n.type)).toEqual(['local', 'mobile', 'toll_free']);
    expectValid(found);
  });

  it('filters by area code (leading national digits) and names the region', async () => {
    const sf = await search({ country: 'US', type: 'local', areaCode: '415', limit: 40 });
    expect(sf).toHaveLength(40);
    for (const n of sf) expect(n.number.startsWith('+1415')).toBe(true);
    expect(new Set(sf.map((n) => n.region))).toEqual(new Set(['CA']));
    const london = await search({ country: 'GB', type: 'local', areaCode: '20', limit: 10 });
    expect(london).toHaveLength(10);
    for (const n of london) expect(n).toMatchObject({ region: 'London' });
    expect(london.every((n) => n.number.startsWith('+4420'))).toBe(true);
    expectValid([...sf, ...london]);
  });

  it('filters by a contains pattern with * as one digit, anywhere in the national number', async () => {
    const found = await search({ country: 'US', type: 'local', contains: '55*9', limit: 30 });
    expect(found).toHaveLength(30);
    for (const n of found) expect(n.number.slice(2)).toMatch(/55\d9/);
    const both = await search({ country: 'US', areaCode: '510', contains: '510555****', limit: 5 });
    expect(both).toHaveLength(5);
    for (const n of both) expect(n.number).toMatch(/^\+1510555\d{4}$/);
    expectValid([...found, ...both]);
    expect(containsPattern('1*3').test('9123')).toBe(true);
    expect(containsPattern('1*3').test('9134')).toBe(false);
  });

  it('filters by capabilities: every listed one is present', async () => {
    const all = await search({ country: 'US', type: 'local', limit: 60 });
    expect(all.some((n) => !n.capabilities.includes('mms'))).toBe(true);
    const mms = await search({ country: 'US', type: 'local', capabilities: ['mms', 'sms'], limit: 30 });
    expect(mms).toHaveLength(30);
    for (const n of mms) expect(n.capabilities).toEqual(expect.arrayContaining(['mms', 'sms']));
    // The capability filter keeps the stream's order: its results are the unfiltered stream's mms numbers.
    expect(mms.slice(0, 5)).toEqual(all.filter((n) => n.capabilities.includes('mms')).slice(0, 5));
    expect(await search({ country: 'GB', type: 'local', capabilities: ['sms'] })).toEqual([]);
    const gbSms = await search({ country: 'GB', capabilities: ['sms'], limit: 10 });
    expect(gbSms.every((n) => n.type === 'mobile')).toBe(true);
  });

  it('skips numbers someone holds and still fills the page', async () => {
    const base = await search({ country: 'US', type: 'toll_free', limit: 10 });
    const held = new Set([base[0]!.number, base[3]!.number]);
    const found = await provider.search({ country: 'US', type: 'toll_free', limit: 10 }, async (numbers) => new Set(numbers.filter((n) => held.has(n))));
    expect(found).toHaveLength(10);
    expect(found.some((n) => held.has(n.number))).toBe(false);
    expect(found.slice(0, 8)).toEqual(base.filter((n) => !held.has(n.number)));
  });

  it('has no short codes, no North American mobiles and nothing for an unknown area code', async () => {
    expect(await search({ country: 'US', type: 'short_code' })).toEqual([]);
    expect(await search({ country: 'US', type: 'mobile' })).toEqual([]);
    expect(await search({ country: 'US', areaCode: '999' })).toEqual([]);
  });

  it('answers limit 100 quickly', async () => {
    const started = performance.now();
    const found = await search({ country: 'US', limit: 100 });
    expect(found).toHaveLength(100);
    expect(performance.now() - started).toBeLessThan(3000);
  });
});

describe('describing numbers', () => {
  it('describes a number the same way search listed it', async () => {
    for (const n of await search({ country: 'GB', limit: 12 })) expect(describeNumber(n.number)).toEqual(n);
  });

  it('knows regions, capabilities and prices', () => {
    expect(describeNumber('+14155550134')).toMatchObject({ country: 'US', type: 'local', region: 'CA', friendlyName: '(415) 555-0134', monthlyCost: '1.15', currency: 'USD' });
    expect(describeNumber('+18005550134')).toMatchObject({ type: 'toll_free', monthlyCost: '2.15', capabilities: ['voice', 'sms', 'mms'] });
    expect(describeNumber('+442071234567')).toMatchObject({ country: 'GB', type: 'local', region: 'London', capabilities: ['voice'] });
    expect(describeNumber('+447400123456')).toMatchObject({ country: 'GB', type: 'mobile', capabilities: ['voice', 'sms', 'whatsapp'] });
    expect(regionOf('FR', 'local', '142685300')).toBe('France');
    expect(capabilitiesOf('AU', 'mobile', '412345678')).toEqual(['voice', 'sms', 'mms', 'whatsapp']);
    expect(monthlyCostOf('ZW', 'toll_free')).toBe('25.00');
    expect(getCountryCallingCode('US')).toBe('1');
  });

  it('does not host numbers libphonenumber cannot type as local, mobile or toll-free', () => {
    expect(describeNumber('+15005550006')).toBeUndefined(); // personal-number range (sandbox magic numbers)
    expect(describeNumber('+19005551234')).toBeUndefined(); // premium rate
    expect(describeNumber('+447700900123')).toBeUndefined(); // Ofcom drama range: not valid
    expect(describeNumber('+1415555013')).toBeUndefined();
  });
});

describe('sandbox ports', () => {
  const order = (over: Partial<PortOrder> = {}): PortOrder => ({
    id: 'port_test', numbers: ['+14155550134'], currentCarrier: 'AT&T', authorizationName: 'Jane Doe', accountNumber: '12345', pin: '1234', ...over,
  });

  it('submits, then completes', async () => {
    const submitted = await provider.submitPort(order());
    expect(submitted).toEqual({ status: 'submitted', reference: 'sandbox-port:port_test' });
    expect(await provider.checkPort(order(), 'sandbox-port:port_test')).toEqual({ status: 'completed', reference: 'sandbox-port:port_test' });
  });

  it('rejects a wrong PIN at submission and an unportable number after it', async () => {
    expect(await provider.submitPort(order({ pin: SANDBOX_NUMBERS_MAGIC.rejectedPin }))).toMatchObject({ status: 'rejected', code: 'pin_mismatch' });
    const unportable = order({ numbers: ['+14155550134', '+14155550000'] });
    expect(await provider.submitPort(unportable)).toMatchObject({ status: 'submitted' });
    expect(await provider.checkPort(unportable, 'ref')).toMatchObject({ status: 'rejected', code: 'number_not_portable' });
  });
});
