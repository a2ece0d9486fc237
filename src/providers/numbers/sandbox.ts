/**
 * The sandbox number carrier, used by test-mode keys. Its inventory is generated, never stored:
 * every number it offers is valid for its country and type according to libphonenumber's
 * metadata (checked with `isValid()` and `getType()`), and a query always yields the same
 * numbers in the same order (the generator is seeded by the query), minus numbers a customer
 * holds. Attributes (region, capabilities, price) are a function of the number alone, so a
 * number found by search is described the same way when it is bought.
 *
 * | input                                   | behaviour                                                      |
 * |-----------------------------------------|----------------------------------------------------------------|
 * | type `short_code`                       | no instant inventory: search answers an empty list             |
 * | type `mobile` in US/CA                  | none (North American numbers are not typed mobile)             |
 * | a number libphonenumber cannot type as fixed line, mobile or toll-free (e.g. +1500555…) | not in inventory: cannot be bought or ported |
 * | port with `pin` `0000`                  | rejected at submission: `pin_mismatch`                         |
 * | port with a number ending in `0000`     | submitted, then rejected by the losing carrier: `number_not_portable` |
 * | any other port                          | submitted, then completed                                      |
 *
 * How long a port takes is not the carrier's decision here: the numbers jobs check back after
 * SANDBOX_PORT_SUBMIT_MS and SANDBOX_PORT_COMPLETE_MS.
 */
import { getCountryCallingCode, isSupportedCountry, Metadata, parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import { capabilitiesOf, CURRENCY, LOCAL_PREFIXES, monthlyCostOf, possibleCapabilitiesOf, regionOf } from './catalog.ts';
import { generateDigits, parseDigitPattern, Rng } from './patterns.ts';
import type { AvailableNumber, NumberSearch, NumbersProvider, PortOrder, PortProgress, TakenCheck } from './types.ts';

export const SANDBOX_NUMBERS_MAGIC = {
  /** A port with this PIN is rejected at submission. */
  rejectedPin: '0000',
  /** A port containing a number ending in these digits is rejected after submission. */
  unportableSuffix: '0000',
} as const;

/** Types the sandbox sells instantly, in the order an untyped search interleaves them. */
const INSTANT_TYPES = ['local', 'mobile', 'toll_free'] as const;
type InstantType = (typeof INSTANT_TYPES)[number];

const LIB_TYPE: Record<InstantType, { metadata: string; accepts: readonly string[] }> = {
  local: { metadata: 'FIXED_LINE', accepts: ['FIXED_LINE', 'FIXED_LINE_OR_MOBILE'] },
  mobile: { metadata: 'MOBILE', accepts: ['MOBILE'] },
  toll_free: { metadata: 'TOLL_FREE', accepts: ['TOLL_FREE'] },
};

/** Attempts per query stream before it is considered exhausted, and before giving up on a stream that found nothing. */
const MAX_ATTEMPTS = 20_000;
const HOPELESS_AFTER = 2_000;

type PlanType = { pattern(): string; possibleLengths(): number[] | undefined };
type PlanWithTypes = { type(name: string): PlanType | undefined; possibleLengths(): number[] };
type TypeGenerator = { tree: ReturnType<typeof parseDigitPattern>; lengths: number[] };

const E164 = /^\+[1-9]\d{1,14}$/;

const generators = new Map<string, TypeGenerator | null>();

function generatorFor(country: string, type: InstantType): TypeGenerator | null {
  const key = `${country}:${type}`;
  const cached = generators.get(key);
  if (cached !== undefined) return cached;
  let result: TypeGenerator | null = null;
  if (isSupportedCountry(country)) {
    const metadata = new Metadata();
    metadata.selectNumberingPlan(country);
    const plan = metadata.numberingPlan as unknown as PlanWithTypes;
    const planType = plan.type(LIB_TYPE[type].metadata);
    const pattern = planType?.pattern();
    if (planType && pattern) result = { tree: parseDigitPattern(pattern), lengths: planType.possibleLengths() ?? plan.possibleLengths() };
  }
  generators.set(key, result);
  return result;
}

function libTypeToOurs(libType: string | undefined): InstantType | undefined {
  return INSTANT_TYPES.find((t) => libType !== undefined && LIB_TYPE[t].accepts.includes(libType));
}

/** The sandbox's listing of one E.164 number, or undefined when it is not a number the sandbox can host. */
export function describeNumber(e164: string): AvailableNumber | undefined {
  // libphonenumber accepts some national numbers (Japanese toll-free) longer than E.164 allows.
  if (!E164.test(e164)) return undefined;
  const parsed = parsePhoneNumberFromString(e164);
  if (!parsed || !parsed.country || parsed.number !== e164 || !parsed.isValid()) return undefined;
  const type = libTypeToOurs(parsed.getType());
  if (!type) return undefined;
  const country = parsed.country;
  const national = String(parsed.nationalNumber);
  return {
    number: parsed.number, country, type, region: regionOf(country, type, national), friendlyName: parsed.formatNational(),
    capabilities: capabilitiesOf(country, type, national), monthlyCost: monthlyCostOf(country, type), currency: CURRENCY,
  };
}

/** `contains` as a regular expression over the national number (`*` is any one digit). */
export function containsPattern(contains: string): RegExp {
  return new RegExp(contains.replace(/\*/g, '\\d'));
}

function overlay(digits: string, pattern: string, at: number): string {
  let out = digits.slice(0, at);
  for (let k = 0; k < pattern.length; k++) out += pattern[k] === '*' ? digits[at + k]! : pattern[k]!;
  return out + digits.slice(at + pattern.length);
}

/** The query's numbers of one type, in a stable order: seeded by the query, not by limit or capabilities. */
function* stream(query: NumberSearch, type: InstantType): Generator<AvailableNumber> {
  const gen = generatorFor(query.country, type);
  if (!gen) return;
  const callingCode = getCountryCallingCode(query.country as CountryCode);
  const rng = new Rng(['sandbox-numbers-v1', query.country, type, query.areaCode ?? '', query.contains ?? ''].join('|'));
  const prefixes = type === 'local' ? [...(LOCAL_PREFIXES[query.country]?.keys() ?? [])] : [];
  const areaCode = query.areaCode ?? '';
  const contains = query.contains ?? '';
  const matcher = contains ? containsPattern(contains) : undefined;
  const seen = new Set<string>();
  let found = 0;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (found === 0 && attempt >= HOPELESS_AFTER) return;
    let national: string;
    const fill = (prefix: string) => {
      const lengths = gen.lengths.filter((l) => l > prefix.length);
      return lengths.length ? prefix + rng.digits(rng.pick(lengths) - prefix.length) : prefix;
    };
    if (areaCode) national = fill(areaCode);
    else if (prefixes.length) national = fill(rng.pick(prefixes));
    else national = generateDigits(gen.tree, rng);
    if (contains) {
      if (contains.length > national.length) continue;
      // Prefer placing the pattern after the area code; a pattern that spans it can still match.
      const start = contains.length <= national.length - areaCode.length ? areaCode.length : 0;
      national = overlay(national, contains, start + rng.int(national.length - contains.length - start + 1));
    }
    if (!national.startsWith(areaCode) || (matcher && !matcher.test(national))) continue;
    const number = `+${callingCode}${national}`;
    if (seen.has(number)) continue;
    const listing = describeNumber(number);
    if (!listing || listing.type !== type || listing.country !== query.country) continue;
    seen.add(number);
    found++;
    yield listing;
  }
}

/** Untyped searches interleave the types the country offers: local, mobile, toll-free, local, … */
function* interleave(streams: Generator<AvailableNumber>[]): Generator<AvailableNumber> {
  let live = streams;
  while (live.length) {
    const next: Generator<AvailableNumber>[] = [];
    for (const s of live) {
      const r = s.next();
      if (!r.done) {
        yield r.value;
        next.push(s);
      }
    }
    live = next;
  }
}

export class SandboxNumbersProvider implements NumbersProvider {
  readonly name = 'sandbox';

  async search(query: NumberSearch, taken: TakenCheck): Promise<AvailableNumber[]> {
    if (query.type === 'short_code') return [];
    const wanted = query.capabilities ?? [];
    const types = (query.type ? [query.type as InstantType] : [...INSTANT_TYPES])
      .filter((t) => wanted.every((c) => possibleCapabilitiesOf(query.country, t).includes(c)));
    const source = interleave(types.map((t) => stream(query, t)));
    const out: AvailableNumber[] = [];
    let exhausted = false;
    while (out.length < query.limit && !exhausted) {
      const batch: AvailableNumber[] = [];
      const size = Math.max(10, (query.limit - out.length) * 2);
      while (batch.length < size) {
        const r = source.next();
        if (r.done) {
          exhausted = true;
          break;
        }
        if (wanted.every((c) => r.value.capabilities.includes(c))) batch.push(r.value);
      }
      if (!batch.length) break;
      const held = await taken(batch.map((b) => b.number));
      for (const b of batch) if (!held.has(b.number) && out.length < query.limit) out.push(b);
    }
    return out;
  }

  async lookup(number: string): Promise<AvailableNumber | undefined> {
    return describeNumber(number);
  }

  async provision(_number: string, idempotencyKey: string): Promise<{ reference: string }> {
    return { reference: `sandbox:${idempotencyKey}` };
  }

  async release(): Promise<void> {}

  async portable(number: string): Promise<AvailableNumber | undefined> {
    return describeNumber(number);
  }

  async submitPort(order: PortOrder): Promise<PortProgress> {
    if (order.pin === SANDBOX_NUMBERS_MAGIC.rejectedPin) {
      return { status: 'rejected', code: 'pin_mismatch', reason: 'The losing carrier rejected the port: the PIN does not match the account' };
    }
    return { status: 'submitted', reference: `sandbox-port:${order.id}` };
  }

  async checkPort(order: PortOrder, reference: string): Promise<PortProgress> {
    const unportable = order.numbers.find((n) => n.endsWith(SANDBOX_NUMBERS_MAGIC.unportableSuffix));
    if (unportable) {
      return { status: 'rejected', code: 'number_not_portable', reason: `The losing carrier rejected the port: ${unportable} is not active on the account given` };
    }
    return { status: 'completed', reference };
  }
}

