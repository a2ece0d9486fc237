/**
 * The `voiceNumbers` port: the organization's active numbers that carry voice (voice calls and
 * conferences use them as caller id). Every call placement asks, so concurrent lookups share one
 * statement (platform/db/batcher.ts) on the raw pool; the same read is offered as a part
 * (`voiceNumbersRead`, platform/db/pairedReads.ts) that a placement runs in one statement with its
 * other read (the consent of `to`).
 */
import type { Pool } from 'pg';
import { Batcher } from '../../platform/db/batcher.ts';
import { genericArrays } from '../../platform/db/plans.ts';
import type { PartRow, ReadPart } from '../../platform/db/pairedReads.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { InboundNumber, VoiceNumbersPort } from '../voice/voice.ports.ts';

/**
 * The batch's lookup over parameters `$first` (organizations) and `$first + 1` (modes), one row per
 * tenant. Its arrays are read through sub-selects (`genericArrays`, platform/db/plans.ts), so a
 * named statement of it settles on one generic plan instead of planning every execution (as
 * `unnest($1::text[], $2::text[])` was, on every call placed).
 */
export function voiceNumbersSql(first: number): string {
  return `select r.org, r.mode, coalesce(n.numbers, '{}') as numbers
             from unnest(${genericArrays([`$${first}::text[]`, `$${first + 1}::text[]`])}) as r(org, mode)
             left join lateral (
               select array_agg(p.number order by p.id) as numbers from phone_numbers p
               where p.organization_id = r.org and p.mode = r.mode and p.status = 'active' and p.capabilities @> '["voice"]'::jsonb
             ) n on true`;
}

/** The lookup as a statement of its own. Exported for test/prepared-plans.test.ts. */
export const VOICE_NUMBERS_SQL = voiceNumbersSql(1);

const keyOf = (t: TenantRef) => `${t.organizationId}\u0000${t.mode}`;

/** The lookup as a part of another module's statement (pairedReads.ts): each tenant's numbers. */
export const voiceNumbersRead: ReadPart<TenantRef, string[]> & { heldSql(rows: string, org: string, mode: string, number: string): string } = {
  params: 2,
  sql: voiceNumbersSql,
  values: (tenants) => {
    const keys = [...new Set(tenants.map(keyOf))].map((k) => k.split('\u0000') as [string, string]);
    return [keys.map((k) => k[0]), keys.map((k) => k[1])];
  },
  answers: (rows: readonly PartRow[], tenants) => {
    const found = new Map(rows.map((r) => [`${String(r.org)}\u0000${String(r.mode)}`, (r.numbers as string[] | null) ?? []]));
    return tenants.map((t) => found.get(keyOf(t)) ?? []);
  },
  /** The part's rows hold `number` for the tenant: what a caller checks on the answer, in SQL. */
  heldSql: (rows, org, mode, number) => `exists (select 1 from ${rows} h where h.org = ${org} and h.mode = ${mode} and ${number} = any(h.numbers))`,
};

export function voiceNumbersPort(pool: Pool): VoiceNumbersPort {
  const batcher = new Batcher<TenantRef, string[]>(async (tenants) => {
    const { rows } = await pool.query<PartRow>({ name: 'numbers_voice_numbers', text: VOICE_NUMBERS_SQL, values: voiceNumbersRead.values(tenants) });
    return voiceNumbersRead.answers(rows, tenants);
  }, { maxInFlight: 2 });
  return {
    voiceNumbers: (tenant) => batcher.submit({ organizationId: tenant.organizationId, mode: tenant.mode }),
    voiceNumbersRead,
    inboundNumber: async (tenant, number) => {
      const { rows } = await pool.query<{ voice_route: InboundNumber['voiceRoute']; agent_id: string | null }>(
        `select voice_route, agent_id from phone_numbers
          where organization_id = $1 and mode = $2 and number = $3 and status = 'active' and capabilities @> '["voice"]'::jsonb`,
        [tenant.organizationId, tenant.mode, number],
      );
      const row = rows[0];
      return row ? { voiceRoute: row.voice_route, agentId: row.agent_id } : undefined;
    },
  };
}
