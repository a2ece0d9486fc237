/**
 * What each node type does in an execution. Nodes whose effect is in this database run inside the
 * step's transaction (send_message hands messaging the transaction, so the message and its delivery
 * job commit with the step: a retried step never sends twice). Nodes that call out (http_request,
 * contact updates, agent) run before it, carrying an idempotency key derived from the execution
 * and the step; their outcome is recorded only if the execution is still at that step.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { isServiceError } from '../../platform/errors.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { SafeHttpError, safeRequest, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { isEmail, normalizePhone } from '../../platform/recipients.ts';
import type { MessageSenderPort, SendBatch } from '../messaging/messaging.ports.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import type { FlowExecution } from './flows.entities.ts';
import type { Context } from './flows.phi.ts';
import { evaluate, render, renderDeep, type Rule } from './flows.conditions.ts';
import { nextNode, type FlowDefinition, type FlowNode, type NodeType } from './flows.graph.ts';
import type { FlowAgentsPort, FlowContactsPort } from './flows.ports.ts';

/**
 * An execution being run: its context in clear (opened when sealed), and the codec its writes are
 * sealed with in HIPAA mode (null otherwise; `sealed` says the same for the nodes).
 */
export type RunState = { ex: FlowExecution; ctx: Context; codec: PhiCodec | null; sealed: boolean };

export type StepError = { code: string; message: string };
export type Outcome =
  | { kind: 'next'; output: Record<string, unknown>; branch?: string; input?: Record<string, unknown> }
  | { kind: 'wait'; output: Record<string, unknown>; until: Date; resume: 'timer' | 'timeout'; waiting?: { address: string; channel: string | null; until: string }; input?: Record<string, unknown> }
  | { kind: 'end'; output: Record<string, unknown> }
  | { kind: 'fail'; error: StepError; input?: Record<string, unknown> };

/** Node types that call out of the database: run before the step's transaction. */
export const EXTERNAL: ReadonlySet<NodeType> = new Set(['http_request', 'update_contact', 'add_tag', 'add_to_list', 'agent']);
const HTTP_BODY_KEEP = 16 * 1024;

export type NodeDeps = {
  clock: Clock;
  urlPolicy: UrlPolicy;
  messages: MessageSenderPort;
  contacts: FlowContactsPort;
  agents: () => FlowAgentsPort | undefined;
};

const fail = (code: string, message: string, input?: Record<string, unknown>): Outcome => ({ kind: 'fail', error: { code, message }, ...(input ? { input } : {}) });

function errorOutcome(e: unknown, input?: Record<string, unknown>): Outcome {
  if (isServiceError(e)) return fail(e.code, e.message, input);
  throw e;
}

export class NodeRunner {
  readonly #d: NodeDeps;

  constructor(deps: NodeDeps) {
    this.#d = deps;
  }

  /** A batch that gathers the messages of the steps run in one transaction (written with one statement before it commits). */
  sendBatch(): SendBatch {
    return this.#d.messages.sendBatch();
  }

  /** Nodes run inside the step's transaction; messages sent join `sends` when given (else they are written at once). */
  async internal(tx: EntityManager, scope: Scope, run: RunState, def: FlowDefinition, node: FlowNode, seq: number, sends?: SendBatch): Promise<Outcome> {
    const { ex, ctx } = run;
    const c = node.config;
    switch (node.type) {
      case 'trigger':
        return { kind: 'next', output: {} };
      case 'end':
        return { kind: 'end', output: (renderDeep(c.output ?? {}, ctx) as Record<string, unknown>) };
      case 'condition': {
        const result = evaluate(c.rules as Rule, ctx);
        return { kind: 'next', output: { result }, branch: String(result) };
      }
      case 'wait': {
        const now = this.#d.clock.now();
        let until: Date;
        if (typeof c.seconds === 'number') until = new Date(now.getTime() + c.seconds * 1000);
        else {
          const at = Date.parse(render(String(c.until), ctx));
          if (Number.isNaN(at)) return fail('INVALID_WAIT', `wait until ${JSON.stringify(render(String(c.until), ctx))} is not a time`);
          until = new Date(Math.max(at, now.getTime()));
        }
        return { kind: 'wait', output: { until: until.toISOString() }, until, resume: 'timer' };
      }
      case 'wait_for_reply': {
        const address = addressOf(render(String(c.from), ctx));
        if (!address) return fail('INVALID_RECIPIENT', `wait_for_reply: ${JSON.stringify(render(String(c.from), ctx))} is not a phone number or email address`);
        const until = new Date(this.#d.clock.now().getTime() + Number(c.timeout_seconds) * 1000);
        const waiting = { address, channel: (c.channel as string | undefined) ?? null, until: until.toISOString() };
        return { kind: 'wait', output: { waiting_for: address, until: waiting.until }, until, resume: 'timeout', waiting, input: { from: address } };
      }
      case 'send_message':
        return this.#send(tx, scope, run, node, seq, sends);
      case 'webhook_event': {
        const data = renderDeep(c.data ?? {}, ctx) as Record<string, unknown>;
        // HIPAA mode: the rendered data may be PHI; it stays in the sealed step log (receivers read the step).
        const carried = run.sealed ? { data: null, data_sealed: true } : { data };
        emitEvent(tx, ex, {
          type: 'flow.custom_event', resourceType: 'flow_execution', resourceId: ex.id, sequence: ex.sequence,
          data: { event: c.event, ...carried, flow_id: ex.flowId, execution_id: ex.id, node_id: node.id, seq, depth: ex.depth + 1 },
        }, this.#d.clock.now());
        return { kind: 'next', output: { event: c.event, data } };
      }
      default:
        // External nodes never get here (see EXTERNAL); a definition is validated at save time.
        void def;
        return fail('UNKNOWN_NODE', `node type ${node.type} cannot run here`);
    }
  }

  async #send(tx: EntityManager, scope: Scope, run: RunState, node: FlowNode, seq: number, sends: SendBatch | undefined): Promise<Outcome> {
    const within = { within: tx, ...(sends ? { batch: sends } : {}) };
    const { ex, ctx } = run;
    const c = node.config;
    const channel = c.channel as 'sms' | 'whatsapp' | 'email' | 'rcs' | 'viber';
    const rawTo = render(String(c.to), ctx).trim();
    const body = typeof c.body === 'string' ? render(c.body, ctx) : undefined;
    // The step log keeps the rendered body (sealed with the rest of the step in HIPAA mode).
    const input = { channel, to: rawTo, ...(body === undefined ? {} : { body }), ...(c.template_id ? { template_id: c.template_id } : {}) };
    const template = c.template_id ? { template_id: String(c.template_id), variables: renderDeep(c.variables ?? {}, ctx) as Record<string, unknown> } : {};
    const metadata = { flow_id: ex.flowId, flow_execution_id: ex.id, flow_step: seq };
    const from = typeof c.from === 'string' ? render(c.from, ctx) : undefined;
    try {
      let message: { id: string; status: string };
      if (channel === 'email') {
        const to = rawTo.toLowerCase();
        if (!isEmail(to)) return fail('INVALID_EMAIL', `${JSON.stringify(rawTo)} is not a valid email address`, input);
        message = await this.#d.messages.sendEmail(scope, { to: [to], subject: render(String(c.subject), ctx), text: body ?? '', ...(from ? { from } : {}), metadata }, within);
      } else {
        const to = normalizePhone(rawTo);
        if (!to) return fail('INVALID_PHONE_NUMBER', `${JSON.stringify(rawTo)} is not a valid phone number in E.164 format`, input);
        const common = { to, ...(body !== undefined ? { body } : {}), ...template, ...(from ? { from } : {}), metadata };
        message = channel === 'sms' ? await this.#d.messages.sendSms(scope, common, within)
          : channel === 'rcs' ? await this.#d.messages.sendRcs(scope, { ...common, type: 'text' }, within)
            : channel === 'viber' ? await this.#d.messages.sendViber(scope, common, within)
              : await this.#d.messages.sendWhatsApp(scope, { to, kind: 'text', text: { body: body ?? '' }, ...(from ? { from } : {}), metadata }, within);
      }
      return { kind: 'next', output: { message_id: message.id, status: message.status, channel, to: rawTo }, input };
    } catch (e) {
      return errorOutcome(e, input);
    }
  }

  /** Nodes run before the step's transaction; `key` is the step's idempotency key. */
  async external(scope: Scope, run: RunState, def: FlowDefinition, node: FlowNode, key: string): Promise<Outcome> {
    const { ctx } = run;
    const c = node.config;
    const contactId = () => render(String(c.contact_id), ctx).trim();
    try {
      switch (node.type) {
        case 'http_request':
          return await this.#http(ctx, def, node, key);
        case 'update_contact': {
          const id = contactId();
          const fields = renderDeep(c.fields, ctx) as Record<string, unknown>;
          if (!id) return fail('NOT_FOUND', 'update_contact: contact_id rendered empty', { fields });
          await this.#d.contacts.updateContact(scope, id, fields);
          return { kind: 'next', output: { contact_id: id, updated: Object.keys(fields) }, input: { contact_id: id, fields } };
        }
        case 'add_tag': {
          const id = contactId();
          const tags = (c.tags as string[]).map((t) => render(t, ctx).trim()).filter((t) => t !== '');
          if (!id) return fail('NOT_FOUND', 'add_tag: contact_id rendered empty', { tags });
          await this.#d.contacts.addTags(scope, id, tags);
          return { kind: 'next', output: { contact_id: id, tags }, input: { contact_id: id, tags } };
        }
        case 'add_to_list': {
          const id = contactId();
          if (!id) return fail('NOT_FOUND', 'add_to_list: contact_id rendered empty');
          await this.#d.contacts.addToList(scope, String(c.list_id), id);
          return { kind: 'next', output: { contact_id: id, list_id: c.list_id }, input: { contact_id: id, list_id: c.list_id } };
        }
        case 'agent': {
          const agents = this.#d.agents();
          if (!agents) return fail('AGENT_ERROR', 'agent nodes need the agents context, which is not installed');
          const input = {
            agentId: String(c.agent_id), channel: (c.channel as string | undefined) ?? null,
            address: typeof c.to === 'string' ? render(c.to, ctx) : null, message: typeof c.message === 'string' ? render(c.message, ctx) : null,
          };
          const r = await agents.handOff(scope, { ...input, context: ctx, idempotencyKey: key });
          return { kind: 'next', output: { conversation_id: r.conversationId, ...(r.output ?? {}) }, input };
        }
        default:
          return fail('UNKNOWN_NODE', `node type ${node.type} cannot run here`);
      }
    } catch (e) {
      return errorOutcome(e);
    }
  }

  async #http(ctx: Context, def: FlowDefinition, node: FlowNode, key: string): Promise<Outcome> {
    const c = node.config;
    const url = render(String(c.url), ctx);
    const method = (c.method as string | undefined) ?? 'POST';
    // GET and DELETE send no body unless one is configured; the others send `body` (default {}).
    const body = c.body !== undefined ? renderDeep(c.body, ctx) : method === 'GET' || method === 'DELETE' ? null : {};
    const headers = { ...(renderDeep(c.headers ?? {}, ctx) as Record<string, string>), 'Idempotency-Key': key };
    const input = { url, method, body };
    const hasErrorBranch = nextNode(def, node.id, 'error') !== undefined;
    try {
      const res = await safeRequest(method, url, body === null ? null : JSON.stringify(body), headers, { policy: this.#d.urlPolicy, timeoutMs: Number(c.timeout_ms ?? 10_000), maxResponseBytes: HTTP_BODY_KEEP });
      let parsed: unknown = res.body;
      try { parsed = JSON.parse(res.body); } catch { /* kept as text */ }
      const output = { status: res.status, body: parsed, time_ms: Math.round(res.timeMs) };
      const ok = res.status >= 200 && res.status < 300;
      if (!ok && !hasErrorBranch) return fail('HTTP_REQUEST_FAILED', `${url} answered HTTP ${res.status}`, input);
      return { kind: 'next', output, branch: ok ? 'success' : 'error', input };
    } catch (e) {
      if (!(e instanceof SafeHttpError)) throw e;
      if (hasErrorBranch && e.kind !== 'blocked_address' && e.kind !== 'invalid_url') return { kind: 'next', output: { status: null, error: e.message }, branch: 'error', input };
      return fail('HTTP_REQUEST_FAILED', `${url}: ${e.message}`, input);
    }
  }
}

/** A phone number (E.164) or a lower-cased email address. */
export function addressOf(raw: string): string | null {
  const s = raw.trim();
  if (s.includes('@')) return isEmail(s.toLowerCase()) ? s.toLowerCase() : null;
  return normalizePhone(s) ?? null;
}
