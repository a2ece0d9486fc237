/**
 * HIPAA housekeeping of agent conversations, in batches, idempotent and safe with several
 * instances (rows are locked with `for update`, not skipped, so a row a concurrent writer holds is
 * waited for rather than left behind):
 * - retention: the content and tool calls of messages older than the organization's retention
 *   period, and the context of conversations whose last message is older, are deleted (rows,
 *   roles, tool names, guardrail decisions, tokens and timestamps stay; `content_purged_at` set);
 * - backfill: content stored in clear before the organization's HIPAA mode was on (or by an
 *   instance that had not seen the change yet) is sealed.
 */
import type { Pool, PoolClient } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import type { PhiPort } from '../../platform/phi.ts';
import type { AgentConversation, AgentMessage } from './agents.entities.ts';
import { sealAgentMessage, sealConversationContext } from './agents.phi.ts';

export const AGENT_RETENTION_JOB = 'agents.phi-retention';
export const AGENT_BACKFILL_JOB = 'agents.phi-backfill';

export class AgentRetention {
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #phi: () => PhiPort | undefined;
  readonly #batch: number;

  constructor(deps: { pool: Pool; clock: Clock; phi: () => PhiPort | undefined; batchSize: number }) {
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#phi = deps.phi;
    this.#batch = deps.batchSize;
  }

  /** Purges message content and conversation context past their organization's retention period; returns how many rows. */
  async purgeExpired(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, cutoff } of await port.retention()) {
      const args = [organizationId, cutoff, this.#clock.now(), this.#batch];
      total += await this.#batches(`
        with picked as (
          select id from agent_messages where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update agent_messages m set content = '', phi = null, content_purged_at = $3,
               tool_calls = coalesce((select jsonb_agg(jsonb_build_object('tool', c->'tool', 'input', null)) from jsonb_array_elements(m.tool_calls) c), '[]'::jsonb)
          from picked where m.id = picked.id`, args);
      total += await this.#batches(`
        with picked as (
          select id from agent_conversations where organization_id = $1 and last_message_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update agent_conversations c set context = '{}'::jsonb, phi = null, content_purged_at = $3
          from picked where c.id = picked.id`, args);
    }
    return total;
  }

  async #batches(sql: string, args: unknown[]): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.#pool.query(sql, args);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < this.#batch) return total;
    }
  }

  /** Seals clear content of organizations in HIPAA mode stored before the mode was on; returns how many rows. */
  async sealBackfill(): Promise<number> {
    const port = this.#phi();
    if (!port) return 0;
    let total = 0;
    for (const { organizationId, until } of await port.backfillPending('agent_messages')) {
      const codec = await port.codec(organizationId);
      total += await this.#sealBatches(async (client) => {
        const { rows } = await client.query<{ id: string; content: string; tool_calls: AgentMessage['toolCalls'] }>(
          `select id, content, tool_calls from agent_messages
            where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
              and (content <> '' or tool_calls <> '[]'::jsonb)
            order by id limit $3 for update`, [organizationId, until, this.#batch]);
        const sealed = rows.map((r) => sealAgentMessage({ id: r.id, content: r.content, toolCalls: r.tool_calls }, codec));
        if (sealed.length > 0) {
          await client.query(
            `update agent_messages m set content = '', tool_calls = s.tool_calls, phi = s.phi
               from jsonb_to_recordset($1::jsonb) as s(id text, tool_calls jsonb, phi text) where m.id = s.id`,
            [JSON.stringify(sealed.map((m) => ({ id: m.id, tool_calls: m.toolCalls, phi: m.phi })))]);
        }
        return rows.length;
      });
      await port.backfillDone(organizationId, 'agent_messages', until);
    }
    for (const { organizationId, until } of await port.backfillPending('agent_conversations')) {
      const codec = await port.codec(organizationId);
      total += await this.#sealBatches(async (client) => {
        const { rows } = await client.query<{ id: string; context: AgentConversation['context'] }>(
          `select id, context from agent_conversations
            where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null and context <> '{}'::jsonb
            order by id limit $3 for update`, [organizationId, until, this.#batch]);
        const sealed = rows.map((r) => sealConversationContext({ id: r.id, context: r.context }, codec));
        if (sealed.length > 0) {
          await client.query(
            `update agent_conversations c set context = '{}'::jsonb, phi = s.phi
               from jsonb_to_recordset($1::jsonb) as s(id text, phi text) where c.id = s.id`,
            [JSON.stringify(sealed.map((c) => ({ id: c.id, phi: c.phi })))]);
        }
        return rows.length;
      });
      await port.backfillDone(organizationId, 'agent_conversations', until);
    }
    return total;
  }

  /** Runs `batch` in its own transaction until it handles fewer rows than a batch. */
  async #sealBatches(batch: (client: PoolClient) => Promise<number>): Promise<number> {
    let total = 0;
    for (;;) {
      const client = await this.#pool.connect();
      let n: number;
      try {
        await client.query('begin');
        n = await batch(client);
        await client.query('commit');
      } catch (e) {
        await client.query('rollback').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
      total += n;
      if (n < this.#batch) return total;
    }
  }
}
