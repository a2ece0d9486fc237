/**
 * The `voiceNumbers` port: the organization's active numbers that carry voice (voice calls and
 * conferences use them as caller id). Every call placement asks, so concurrent lookups share one
 * statement (platform/db/batcher.ts) on the raw pool.
 */
import type { Pool } from 'pg';
import { Batcher } from '../../platform/db/batcher.ts';
import { genericArrays } from '../../platform/db/plans.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { VoiceNumbersPort } from '../voice/voice.ports.ts';

/**
 * The batch's lookup, a named statement: its arrays are read through sub-selects (`genericArrays`,
 * platform/db/plans.ts), so PostgreSQL settles on one generic plan instead of planning every
 * execution (as `unnest($1::text[], $2::text[])` was, on every call placed). Exported for
 * test/prepared-plans.test.ts.
 */
export const VOICE_NUMBERS_SQL = `select r.org, r.mode, coalesce(n.numbers, '{}') as numbers
             from unnest(${genericArrays(['$1::text[]', '$2::text[]'])}) as r(org, mode)
             left join lateral (
               select array_agg(p.number order by p.id) as numbers from phone_numbers p
               where p.organization_id = r.org and p.mode = r.mode and p.status = 'active' and p.capabilities @> '["voice"]'::jsonb
             ) n on true`;

export function voiceNumbersPort(pool: Pool): VoiceNumbersPort {
  const batcher = new Batcher<TenantRef, string[]>(async (tenants) => {
    const keys = [...new Set(tenants.map((t) => `${t.organizationId}\u0000${t.mode}`))].map((k) => k.split('\u0000') as [string, string]);
    const { rows } = await pool.query<{ org: string; mode: string; numbers: string[] }>({
      name: 'numbers_voice_numbers',
      text: VOICE_NUMBERS_SQL,
      values: [keys.map((k) => k[0]), keys.map((k) => k[1])],
    });
    const found = new Map(rows.map((r) => [`${r.org}\u0000${r.mode}`, r.numbers]));
    return tenants.map((t) => found.get(`${t.organizationId}\u0000${t.mode}`) ?? []);
  }, { maxInFlight: 2 });
  return { voiceNumbers: (tenant) => batcher.submit({ organizationId: tenant.organizationId, mode: tenant.mode }) };
}
