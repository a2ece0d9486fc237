/**
 * `POST /v1/agents/{id}/test`: a simulated conversation (one message or scripted turns with
 * expected outcomes). Draft agents can be tested; tools that would reach out (send_message,
 * schedule_callback) answer simulated results; usage is recorded as test invocations, never as
 * channel usage.
 */
import { ServiceError } from '../../platform/errors.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { ChatResult, ChatService } from './chat.service.ts';
import type { TestAgentInput } from './agents.schemas.ts';
import type { AgentsService } from './agents.service.ts';

type Expectation = { check: string; expected: unknown; actual: unknown; passed: boolean };
export type TestTurn = {
  message: string;
  reply: string | null;
  result: ChatResult | null;
  error: { code: string; message: string } | null;
  expectations: Expectation[];
  passed: boolean;
};
export type TestRun = { agentId: string; conversationId: string | null; passed: boolean; turns: TestTurn[] };

export class AgentTestService {
  readonly #chat: ChatService;
  readonly #agents: AgentsService;

  constructor(deps: { chat: ChatService; agents: AgentsService }) {
    this.#chat = deps.chat;
    this.#agents = deps.agents;
  }

  async run(scope: Scope, input: TestAgentInput): Promise<TestRun> {
    await this.#agents.get(scope, input.id);
    const script = input.turns ?? [{ message: input.message!, expect: null }];
    const turns: TestTurn[] = [];
    let conversationId: string | null = null;
    for (const step of script) {
      let result: ChatResult | null = null;
      let error: TestTurn['error'] = null;
      try {
        result = await this.#chat.chat(scope, {
          agentId: input.id, message: step.message, conversationId, context: input.context, channel: 'test', throwOnBlocked: false,
          // The run's own conversation: its history is this request's script (HIPAA mode asks no reason code for it).
          historyChecked: true,
        });
        conversationId = result.conversationId;
      } catch (e) {
        if (!(e instanceof ServiceError)) throw e;
        error = { code: e.code, message: e.message };
      }
      const expectations: Expectation[] = [];
      const exp = step.expect;
      if (exp?.contains != null) {
        const actual = result?.content ?? null;
        expectations.push({ check: 'contains', expected: exp.contains, actual, passed: !!actual?.toLowerCase().includes(exp.contains.toLowerCase()) });
      }
      if (exp?.tool != null) {
        const actual = result?.toolCalls.map((t) => t.tool) ?? [];
        expectations.push({ check: 'tool', expected: exp.tool, actual, passed: actual.includes(exp.tool) });
      }
      if (exp?.blocked != null) {
        const actual = !!result?.blockedBy;
        expectations.push({ check: 'blocked', expected: exp.blocked, actual, passed: actual === exp.blocked });
      }
      if (exp?.handoff != null) {
        const actual = !!result?.handoff;
        expectations.push({ check: 'handoff', expected: exp.handoff, actual, passed: actual === exp.handoff });
      }
      const passed = !error && expectations.every((x) => x.passed);
      turns.push({ message: step.message, reply: result?.content ?? null, result, error, expectations, passed });
      if (error || result?.ended) break;
    }
    return { agentId: input.id, conversationId, passed: turns.length === script.length && turns.every((t) => t.passed), turns };
  }
}
