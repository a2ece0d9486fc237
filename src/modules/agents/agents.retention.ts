/**
 * HIPAA housekeeping of agent conversations (batched, idempotent, safe with several instances:
 * see platform/phiHousekeeping.ts):
 * - retention: the content and tool calls of messages older than the organization's retention
 *   period, and the context of conversations whose last message is older, are deleted (rows,
 *   roles, tool names, guardrail decisions, tokens and timestamps stay; `content_purged_at` set);
 * - backfill: content stored in clear before the organization's HIPAA mode was on (or by an
 *   instance that had not seen the change yet) is sealed.
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { AgentConversation, AgentMessage } from './agents.entities.ts';
import { sealAgentMessage, sealConversationContext } from './agents.phi.ts';

export class AgentRetention extends ContextHousekeeping {
  /** Purges message content and conversation context past their organization's retention period; returns how many rows. */
  purgeExpired(): Promise<number> {
    return this.housekeeping.purge([`
        with picked as (
          select id from agent_messages where organization_id = $1 and created_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update agent_messages m set content = '', phi = null, content_purged_at = $3,
               tool_calls = coalesce((select jsonb_agg(jsonb_build_object('tool', c->'tool', 'input', null)) from jsonb_array_elements(m.tool_calls) c), '[]'::jsonb)
          from picked where m.id = picked.id`, `
        with picked as (
          select id from agent_conversations where organization_id = $1 and last_message_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update agent_conversations c set context = '{}'::jsonb, phi = null, content_purged_at = $3
          from picked where c.id = picked.id`]);
  }

  /** Seals clear content of organizations in HIPAA mode stored before the mode was on; returns how many rows. */
  async sealBackfill(): Promise<number> {
    const messages = await this.housekeeping.backfill('agent_messages', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; content: string; tool_calls: AgentMessage['toolCalls'] }>(
        `select id, content, tool_calls from agent_messages
          where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
            and (content <> '' or tool_calls <> '[]'::jsonb)
          order by id limit $3 for update`, [organizationId, until, limit]);
      const sealed = rows.map((r) => sealAgentMessage({ id: r.id, content: r.content, toolCalls: r.tool_calls }, codec));
      if (sealed.length > 0) {
        await client.query(
          `update agent_messages m set content = '', tool_calls = s.tool_calls, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, tool_calls jsonb, phi text) where m.id = s.id`,
          [JSON.stringify(sealed.map((m) => ({ id: m.id, tool_calls: m.toolCalls, phi: m.phi })))]);
      }
      return { picked: rows.length, changed: rows.length };
    });
    const conversations = await this.housekeeping.backfill('agent_conversations', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; context: AgentConversation['context'] }>(
        `select id, context from agent_conversations
          where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null and context <> '{}'::jsonb
          order by id limit $3 for update`, [organizationId, until, limit]);
      const sealed = rows.map((r) => sealConversationContext({ id: r.id, context: r.context }, codec));
      if (sealed.length > 0) {
        await client.query(
          `update agent_conversations c set context = '{}'::jsonb, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, phi text) where c.id = s.id`,
          [JSON.stringify(sealed.map((c) => ({ id: c.id, phi: c.phi })))]);
      }
      return { picked: rows.length, changed: rows.length };
    });
    return messages + conversations;
  }
}
