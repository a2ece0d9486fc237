/**
 * Triggers evaluated from the events outbox: the relay hands each committed event to `consume` in
 * its own transaction, so matching executions start (and waiting wait_for_reply steps resume) in
 * the transaction that marks the event dispatched: once, and only for committed events. Per relay
 * batch the flows with event and inbound_message triggers of the batch's tenants are read once
 * (answered from this instance's cache while no flow, flow version or plan changed:
 * platform/events/relayLookups.ts), and every start of the batch is written with three statements
 * before the batch commits.
 *
 * Chains: an event caused by a flow execution carries `data.depth` (flow events, the messages a
 * flow sent, contact changes it made: Scope.chainDepth) and starts an execution that deep. A start
 * one level past `maxChainDepth` is recorded failed (CHAIN_DEPTH_EXCEEDED) with its
 * `flow.execution.failed` event; that event (one level deeper still) starts nothing, so a loop
 * of flows ends with one refusal per flow it reached.
 */
import { systemScope } from '../../platform/auth/scope.ts';
import type { Clock } from '../../platform/clock.ts';
import type { Mode } from '../../platform/db/tenant.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';
import { RelayLookupCache } from '../../platform/events/relayLookups.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { evaluate } from './flows.conditions.ts';
import type { FlowDefinition, FlowTrigger } from './flows.graph.ts';
import type { FlowMessagesPort } from './flows.ports.ts';
import { STEP_JOB, stepJobId, type StepJob } from './executions.engine.ts';
import { admit, insertStarts, refusalError, startCounts, type Start, type StartLimits } from './executions.starts.ts';
import type { FlowPhi } from './flows.phi.ts';

export type InboundMessage = { message_id: string; channel: string; from: string; to: string; body: string | null; body_redacted?: true };

/** Whether an event trigger fires for an event (type, then the optional filter over `{ type, data }`). */
export function eventMatches(trigger: FlowTrigger, event: { type: string; data: Record<string, unknown> }): boolean {
  if (trigger.type !== 'event' || trigger.event !== event.type) return false;
  return !trigger.filter || evaluate(trigger.filter, { type: event.type, data: event.data });
}

/** Whether an inbound_message trigger fires: channel, receiving number and first-word keyword filters. */
export function inboundMatches(trigger: FlowTrigger, m: InboundMessage): boolean {
  if (trigger.type !== 'inbound_message') return false;
  if (trigger.channel && trigger.channel !== m.channel) return false;
  if (trigger.number && trigger.number !== m.to) return false;
  if (trigger.keyword) {
    const first = (m.body ?? '').trim().split(/\s+/)[0]?.toUpperCase() ?? '';
    if (first !== trigger.keyword) return false;
  }
  return true;
}

type FlowRow = { id: string; organization_id: string; mode: Mode; version: number; trigger: FlowTrigger; definition: FlowDefinition; plan: Plan };
type WaitingRow = { id: string; organization_id: string; mode: Mode; cursor: number; waiting: { address: string; channel: string | null }; plan: Plan };
type Batch = { flows: Map<string, FlowRow[]>; waiting: Map<string, WaitingRow[]>; starts: Start[]; replies: { data: StepJob; scope: ReturnType<typeof systemScope>; id: string }[] };

/** The lookup's row in relay_lookup_versions (bumped by writes to flows, flow_versions and organizations' plan). */
export const FLOWS_LOOKUP = 'flows';

export type TriggerDeps = { clock: Clock; log: Logger; jobs: Pick<Jobs, 'insertStatement'>; messages: FlowMessagesPort; phi: FlowPhi; limits: StartLimits; maxChainDepth: number };

/** The depth an event puts its executions at: what it carries (caused by a flow execution), else 0. */
export function chainDepthOf(event: { data: Record<string, unknown> }): number {
  const d = event.data.depth;
  return typeof d === 'number' && Number.isInteger(d) && d > 0 ? d : 0;
}

export class TriggerConsumer {
  readonly #d: TriggerDeps;
  readonly #batches = new WeakMap<readonly OutboxEvent[], Batch>();
  /** Event and inbound_message flows by `organization:mode`. */
  readonly #flows = new RelayLookupCache<FlowRow[]>(FLOWS_LOOKUP);

  constructor(deps: TriggerDeps) {
    this.#d = deps;
  }

  async consume(tx: RelayTx, event: OutboxEvent): Promise<void> {
    if (event.type === 'flow.execution.step') return;
    const batch = this.#batches.get(tx.events) ?? await this.#prefetch(tx);
    const key = `${event.organizationId}:${event.mode}`;
    const flows = batch.flows.get(key) ?? [];
    const inbound = event.type === 'message.received' && event.data.direction !== 'outbound';
    const waiting = inbound ? batch.waiting.get(`${key}:${String(event.data.from)}`) ?? [] : [];
    if (flows.length === 0 && waiting.length === 0) return;
    const depth = chainDepthOf(event);
    // Past the refusal's own depth: the chain was stopped and reported one level up.
    if (depth > this.#d.maxChainDepth + 1) return;
    const tooDeep = depth > this.#d.maxChainDepth ? {
      node: null, code: 'CHAIN_DEPTH_EXCEEDED',
      message: `this execution would be ${depth} levels deep in a chain of flow executions (FLOWS_MAX_CHAIN_DEPTH is ${this.#d.maxChainDepth}): its trigger, ${event.type} ${event.id}, was caused by a flow execution at depth ${depth - 1}; not run`,
    } : undefined;
    let message: InboundMessage | undefined;
    /** What clear executions and reply jobs carry of the message: without its body when it is PHI (HIPAA mode). */
    let kept: InboundMessage | undefined;
    if (inbound) {
      const found = await this.#d.messages.inboundMessage(event, String(event.data.message_id));
      message = { message_id: String(event.data.message_id), channel: String(event.data.channel), from: String(event.data.from), to: String(event.data.to), body: found?.body ?? null };
      kept = found?.phi ? { ...message, body: null, body_redacted: true } : message;
    }
    for (const f of flows) {
      const scope = systemScope(f.organization_id, f.mode, f.plan, event.id);
      const flow = { id: f.id, version: f.version, definition: f.definition };
      if (message && inboundMatches(f.trigger, message)) {
        // The body is sealed with the execution in HIPAA mode; an execution stored in clear gets the message without a sealed body.
        batch.starts.push({ scope, flow, triggerType: 'inbound_message', trigger: { type: 'inbound_message', event_id: event.id }, input: { ...message }, clearInput: { ...kept }, depth: 0 });
      } else if (eventMatches(f.trigger, event)) {
        batch.starts.push({ scope, flow, triggerType: 'event', trigger: { type: 'event', event_id: event.id, event_type: event.type }, input: event.data, depth, ...(tooDeep ? { refused: tooDeep } : {}) });
        if (tooDeep) this.#d.log.warn({ organization_id: f.organization_id, flow_id: f.id, event_id: event.id, depth }, 'flow execution refused: chain depth');
      }
    }
    for (const w of waiting) {
      if (!message || (w.waiting.channel && w.waiting.channel !== message.channel)) continue;
      batch.replies.push({
        data: { executionId: w.id, seq: w.cursor, resume: 'reply', reply: kept }, scope: systemScope(w.organization_id, w.mode, w.plan, event.id),
        id: stepJobId(w.id, w.cursor, `reply:${message.message_id}`),
      });
    }
  }

  async #prefetch(tx: RelayTx): Promise<Batch> {
    const batch: Batch = { flows: new Map(), waiting: new Map(), starts: [], replies: [] };
    this.#batches.set(tx.events, batch);
    const relevant = tx.events.filter((e) => e.type !== 'flow.execution.step');
    const tenants = [...new Set(relevant.map((e) => `${e.organizationId}:${e.mode}`))];
    if (tenants.length > 0) {
      batch.flows = await this.#flows.get(tx, tenants, async (missing) => {
        const rows = await tx.query<FlowRow>(
          `select f.id, f.organization_id, f.mode, f.version, f.trigger, v.definition, o.plan
             from flows f join flow_versions v on v.flow_id = f.id and v.version = f.version join organizations o on o.id = f.organization_id
            where f.deleted_at is null and f.trigger_type in ('event','inbound_message') and (f.organization_id || ':' || f.mode) = any($1::text[])`, [missing]);
        const found = new Map<string, FlowRow[]>();
        for (const r of rows) {
          const k = `${r.organization_id}:${r.mode}`;
          found.set(k, [...(found.get(k) ?? []), r]);
        }
        return found;
      }, []);
    }
    const senders = [...new Set(relevant.filter((e) => e.type === 'message.received').map((e) => `${e.organizationId}:${e.mode}:${String(e.data.from)}`))];
    if (senders.length > 0) {
      const rows = await tx.query<WaitingRow>(
        `select e.id, e.organization_id, e.mode, e.cursor, e.waiting, o.plan from flow_executions e join organizations o on o.id = e.organization_id
          where e.status = 'waiting' and e.waiting is not null and (e.organization_id || ':' || e.mode || ':' || (e.waiting->>'address')) = any($1::text[])`, [senders]);
      for (const r of rows) {
        const k = `${r.organization_id}:${r.mode}:${r.waiting.address}`;
        batch.waiting.set(k, [...(batch.waiting.get(k) ?? []), r]);
      }
    }
    tx.beforeCommit(batch, () => this.#flush(tx, batch));
    return batch;
  }

  async #flush(tx: RelayTx, batch: Batch): Promise<void> {
    const now = this.#d.clock.now();
    if (batch.starts.length > 0) {
      const counted = batch.starts.filter((s) => !s.refused);
      const counts = await startCounts(tx.query, counted.map((s) => ({ scope: s.scope, flowId: s.flow.id })), now, this.#d.limits.perMinute);
      for (const s of counted) {
        const refusal = admit(counts, s.scope, s.flow.id, this.#d.limits, now);
        if (!refusal) continue;
        s.refused = refusalError(refusal, s.flow.id);
        this.#d.log.warn({ organization_id: s.scope.organizationId, flow_id: s.flow.id, code: refusal.code }, 'flow execution refused: limit');
      }
      await insertStarts(tx.query, this.#d.jobs, batch.starts, now, (org) => this.#d.phi.writer(org));
    }
    if (batch.replies.length > 0) {
      const statement = await this.#d.jobs.insertStatement(STEP_JOB, batch.replies);
      await tx.query(statement.text, [statement.value]);
    }
  }
}
