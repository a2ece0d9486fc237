/**
 * Pure rules of a campaign send: the address a contact is reached at on a channel, the A/B variant
 * a contact gets (deterministic by contact id and weights), per-contact personalization, and quiet
 * hours in the recipient's local time.
 */
import { createHash } from 'node:crypto';
import { isEmail, normalizePhone } from '../../platform/recipients.ts';
import type { AbVariant, CampaignChannel, QuietHours } from './campaigns.entities.ts';

export type ContactFields = {
  first_name: string | null; last_name: string | null; phone: string | null; email: string | null;
  country: string | null; metadata: Record<string, unknown>;
};

export type AddressOutcome = { address: string } | { skip: 'no_address' | 'invalid' };

export function addressFor(channel: CampaignChannel, c: Pick<ContactFields, 'phone' | 'email'>): AddressOutcome {
  if (channel === 'email') {
    if (!c.email) return { skip: 'no_address' };
    return isEmail(c.email) ? { address: c.email.toLowerCase() } : { skip: 'invalid' };
  }
  if (!c.phone) return { skip: 'no_address' };
  const e164 = normalizePhone(c.phone);
  return e164 ? { address: e164 } : { skip: 'invalid' };
}

/** A stable number in [0, 1) from a key: the same contact always lands in the same bucket. */
export function bucket(key: string): number {
  return createHash('sha256').update(key).digest().readUInt32BE(0) / 0x1_0000_0000;
}

/** The variant by weight for this contact (null without an A/B test). */
export function assignVariant(contactId: string, variants: readonly AbVariant[]): string | null {
  if (variants.length === 0) return null;
  const total = variants.reduce((n, v) => n + v.weight, 0);
  let point = bucket(`variant:${contactId}`) * total;
  for (const v of variants) {
    if (point < v.weight) return v.name;
    point -= v.weight;
  }
  return variants[variants.length - 1]!.name;
}

/**
 * `{{contact.first_name}}`, `{{contact.last_name}}`, `{{contact.phone}}`, `{{contact.email}}`,
 * `{{contact.country}}` and `{{contact.metadata.<key>}}` become the contact's values (empty when
 * unset); anything else is left for the template renderer.
 */
export function personalize(text: string, c: ContactFields): string {
  return text.replace(/\{\{\s*contact\.([a-z_]+)(?:\.([A-Za-z0-9_-]+))?\s*\}\}/g, (whole, field: string, key?: string) => {
    if (field === 'metadata' && key) {
      const v = c.metadata[key];
      return v === undefined || v === null ? '' : String(v);
    }
    if (key) return whole;
    const v = (c as Record<string, unknown>)[field];
    if (v === undefined) return whole;
    return v === null ? '' : String(v);
  });
}

/** Country → an IANA zone for quiet hours when the contact has no `metadata.timezone` (the most populous zone). */
const COUNTRY_ZONES: Record<string, string> = {
  US: 'America/New_York', CA: 'America/Toronto', MX: 'America/Mexico_City', BR: 'America/Sao_Paulo', AR: 'America/Argentina/Buenos_Aires',
  GB: 'Europe/London', IE: 'Europe/Dublin', FR: 'Europe/Paris', DE: 'Europe/Berlin', ES: 'Europe/Madrid', IT: 'Europe/Rome', NL: 'Europe/Amsterdam',
  PT: 'Europe/Lisbon', PL: 'Europe/Warsaw', SE: 'Europe/Stockholm', TR: 'Europe/Istanbul', RU: 'Europe/Moscow', UA: 'Europe/Kyiv',
  IN: 'Asia/Kolkata', CN: 'Asia/Shanghai', JP: 'Asia/Tokyo', KR: 'Asia/Seoul', SG: 'Asia/Singapore', AE: 'Asia/Dubai', SA: 'Asia/Riyadh',
  IL: 'Asia/Jerusalem', ID: 'Asia/Jakarta', PH: 'Asia/Manila', AU: 'Australia/Sydney', NZ: 'Pacific/Auckland', ZA: 'Africa/Johannesburg',
  NG: 'Africa/Lagos', EG: 'Africa/Cairo', KE: 'Africa/Nairobi',
};

const validZone = (tz: unknown): tz is string => {
  if (typeof tz !== 'string' || tz.length === 0) return false;
  try { new Intl.DateTimeFormat('en', { timeZone: tz }); return true; } catch { return false; }
};

/** The recipient's zone: `metadata.timezone`, else the country's zone, else the quiet hours' own, else UTC. */
export function timezoneFor(c: Pick<ContactFields, 'country' | 'metadata'>, fallback: string | null | undefined): string {
  if (validZone(c.metadata.timezone)) return c.metadata.timezone;
  const byCountry = c.country ? COUNTRY_ZONES[c.country.toUpperCase()] : undefined;
  return byCountry ?? (validZone(fallback) ? fallback : 'UTC');
}

const minutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/** Minutes since local midnight at `at` in `tz`. */
function localMinutes(at: Date, tz: string): number {
  const parts = new Intl.DateTimeFormat('en-GB', { timeZone: tz, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).formatToParts(at);
  const h = Number(parts.find((p) => p.type === 'hour')!.value);
  const m = Number(parts.find((p) => p.type === 'minute')!.value);
  return h * 60 + m;
}

/**
 * When `at` falls inside the quiet window (start inclusive, end exclusive; a window may span
 * midnight) in `tz`, the instant the window ends; otherwise null.
 */
export function quietUntil(at: Date, quiet: QuietHours, tz: string): Date | null {
  const now = localMinutes(at, tz);
  const start = minutes(quiet.start);
  const end = minutes(quiet.end);
  const inside = start < end ? now >= start && now < end : now >= start || now < end;
  if (!inside) return null;
  const wait = (end - now + 1440) % 1440 || 1440;
  const until = new Date(at.getTime() + wait * 60_000);
  until.setUTCSeconds(0, 0);
  return until;
}
