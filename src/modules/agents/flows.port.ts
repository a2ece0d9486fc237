/** The `flowAgents` port (declared by flows), over the agents' own turn-taking surface (`agentTurns`). */
import type { FlowAgentsPort } from '../flows/flows.ports.ts';
import type { AgentTurnsPort } from './agents.ports.ts';

/**
 * An `agent` node of a flow hands the contact to the agent: one turn with the node's message; the
 * reply is the node's output (in HIPAA mode the flow stores it sealed, as the conversation does).
 */
export function flowAgentsPort(turns: AgentTurnsPort): FlowAgentsPort {
  return {
    agentExists: (tenant, agentId) => turns.agentExists(tenant, agentId),
    async handOff(scope, input) {
      const channel = input.channel === 'sms' || input.channel === 'whatsapp' || input.channel === 'voice' ? input.channel : 'sms';
      const turn = await turns.replyTurn(scope, {
        agentId: input.agentId, text: input.message ?? 'A flow handed this contact over.', channel, contactAddress: input.address,
        context: { ...input.context, flow_step: input.idempotencyKey }, retryKey: `flow:${input.idempotencyKey}`,
      });
      return { conversationId: turn.conversationId, output: { reply: turn.text, handoff: turn.handoff, ended: turn.ended } };
    },
  };
}
