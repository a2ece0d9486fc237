/** The `voiceAgents` port (declared by voice), over the agents' own turn-taking surface (`agentTurns`). */
import type { VoiceAgentsPort } from '../voice/voice.ports.ts';
import type { AgentTurnsPort } from './agents.ports.ts';

/**
 * A call with an agent on it: the agent must exist in the tenant; when the call is answered the
 * agent takes its first turn (a conversation on the voice channel, context `call_id`). A hangup
 * through the API tells the agent first: its conversation on the call ends `completed` with
 * `ended_reason: "call_ended"` (and `conversation.completed`). On a live call whose audio the
 * service carries, each utterance of the caller (speech to text) is a `reply` turn in the same
 * conversation, its answer spoken by the gateway. A call that ends otherwise (the far
 * end hangs up, max_duration) leaves it to the agents' idle sweep, which marks it abandoned.
 */
export function voiceAgentsPort(turns: AgentTurnsPort): VoiceAgentsPort {
  return {
    exists: (tenant, agentId) => turns.agentExists(tenant, agentId),
    async callStarted(tenant, call) {
      if (!(await turns.agentDeployed(tenant, call.agentId))) return undefined;
      const r = await turns.replyTurn(tenant, {
        agentId: call.agentId, text: 'The call was answered.', channel: 'voice', contactAddress: call.from,
        context: { call_id: call.callId, from: call.from, to: call.to },
      });
      return { conversationId: r.conversationId, text: r.text, ended: r.ended };
    },
    // A live call's caller, heard and transcribed: a turn of the same chat code as any channel's.
    async reply(tenant, call, input) {
      const r = await turns.replyTurn(tenant, {
        agentId: call.agentId, text: input.text, channel: 'voice', contactAddress: call.from, conversationId: input.conversationId,
        context: { call_id: call.callId, from: call.from, to: call.to },
      });
      return { conversationId: r.conversationId, text: r.text, ended: r.ended };
    },
    async callEnding(tenant, call) {
      await turns.endCallConversations(tenant, call.agentId, call.callId, 'call_ended');
    },
  };
}
