/**
 * A flow's trigger and node graph, and their save-time validation (pure: no I/O). Every error is
 * VALIDATION_ERROR with `details.field`, the JSON path of the offending value in the request body
 * (`definition.nodes.2.config.body`, `definition.edges.4.to`, `trigger.cron`), and `details.node`,
 * the id of the node it concerns, when it concerns one.
 */
import { z } from 'zod';
import { ServiceError } from '../../platform/errors.ts';
import { checkRules, hasPlaceholder, type Rule } from './flows.conditions.ts';

export const TRIGGER_TYPES = ['inbound_message', 'webhook', 'schedule', 'api', 'event'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];
export const NODE_TYPES = [
  'trigger', 'send_message', 'wait', 'wait_for_reply', 'condition', 'http_request', 'update_contact', 'add_tag', 'add_to_list', 'agent', 'webhook_event', 'end',
] as const;
export type NodeType = (typeof NODE_TYPES)[number];
export const MESSAGE_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'] as const;
export const INBOUND_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'] as const;

export const MAX_NODES = 100;
export const MAX_EDGES = 200;
export const MAX_WAIT_SECONDS = 30 * 86_400;

export type FlowTrigger = {
  type: TriggerType;
  /** event: an event type of the catalog; `filter`: rules over `{ type, data }`. */
  event?: string;
  filter?: Rule;
  /** inbound_message */
  channel?: (typeof INBOUND_CHANNELS)[number];
  keyword?: string;
  number?: string;
  /** schedule */
  cron?: string;
  timezone?: string;
};

export type FlowNode = { id: string; type: NodeType; name?: string; config: Record<string, unknown> };
export type FlowEdge = { from: string; to: string; branch?: string };
export type FlowDefinition = { nodes: FlowNode[]; edges: FlowEdge[] };

/** The branches a node's outgoing edges may name (none: one unlabelled edge). */
export const BRANCHES: Partial<Record<NodeType, readonly string[]>> = {
  condition: ['true', 'false'],
  wait_for_reply: ['reply', 'timeout'],
  http_request: ['success', 'error'],
};
/** Nodes a cycle may pass through (each turn of the loop waits). */
const WAITS: ReadonlySet<NodeType> = new Set(['wait', 'wait_for_reply']);

function invalid(field: string, message: string, node?: string, extra: Record<string, unknown> = {}): never {
  throw new ServiceError('VALIDATION_ERROR', `${field}: ${message}`, { ...(node !== undefined ? { node } : {}), field, ...extra });
}

const text = (max: number) => z.string().trim().min(1).max(max);
const template = text(2000);
const contactId = template;
const noConfig = z.strictObject({});
const isoOrTemplate = z.string().refine((s) => hasPlaceholder(s) || !Number.isNaN(Date.parse(s)), 'must be an ISO 8601 time or a {{placeholder}}');

const CONFIGS: Record<NodeType, z.ZodType> = {
  trigger: noConfig,
  send_message: z.strictObject({
    channel: z.enum(MESSAGE_CHANNELS),
    to: template,
    from: text(320).optional(),
    body: z.string().min(1).max(4000).optional(),
    subject: text(998).optional(),
    template_id: text(100).optional(),
    variables: z.record(z.string(), z.string().max(2000)).optional(),
  }).superRefine((c, ctx) => {
    if ((c.body === undefined) === (c.template_id === undefined)) ctx.addIssue({ code: 'custom', path: ['body'], message: 'give exactly one of body and template_id' });
    if (c.template_id !== undefined && !['sms', 'rcs', 'viber'].includes(c.channel)) ctx.addIssue({ code: 'custom', path: ['template_id'], message: 'template_id is supported on sms, rcs and viber; use body on whatsapp and email' });
    if (c.channel === 'email' && c.subject === undefined) ctx.addIssue({ code: 'custom', path: ['subject'], message: 'is required for email' });
    if (c.channel !== 'email' && c.subject !== undefined) ctx.addIssue({ code: 'custom', path: ['subject'], message: 'only email messages have a subject' });
  }),
  wait: z.strictObject({
    seconds: z.number().int().min(0).max(MAX_WAIT_SECONDS).optional(),
    until: isoOrTemplate.optional(),
  }).superRefine((c, ctx) => {
    if ((c.seconds === undefined) === (c.until === undefined)) ctx.addIssue({ code: 'custom', path: ['seconds'], message: 'give exactly one of seconds and until' });
  }),
  wait_for_reply: z.strictObject({
    from: template,
    channel: z.enum(INBOUND_CHANNELS).optional(),
    timeout_seconds: z.number().int().min(1).max(MAX_WAIT_SECONDS),
  }),
  condition: z.strictObject({ rules: z.unknown() }),
  http_request: z.strictObject({
    url: template,
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).optional(),
    headers: z.record(z.string().regex(/^[A-Za-z0-9-]{1,64}$/), z.string().max(2000)).optional(),
    body: z.unknown().optional(),
    timeout_ms: z.number().int().min(100).max(30_000).optional(),
  }),
  update_contact: z.strictObject({
    contact_id: contactId,
    fields: z.strictObject({
      first_name: z.string().max(100).optional(),
      last_name: z.string().max(100).optional(),
      lifecycle_stage: z.string().max(40).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
    }).refine((f) => Object.keys(f).length > 0, 'must change at least one field'),
  }),
  add_tag: z.strictObject({ contact_id: contactId, tags: z.array(text(64)).min(1).max(20) }),
  add_to_list: z.strictObject({ contact_id: contactId, list_id: text(100) }),
  agent: z.strictObject({
    agent_id: text(100),
    channel: z.enum(INBOUND_CHANNELS).optional(),
    to: template.optional(),
    message: template.optional(),
  }),
  webhook_event: z.strictObject({
    event: z.string().regex(/^[a-z0-9_][a-z0-9_.-]{0,63}$/, 'lower-case letters, digits, _ . - (up to 64)'),
    data: z.record(z.string(), z.unknown()).optional(),
  }),
  end: z.strictObject({ output: z.record(z.string(), z.unknown()).optional() }),
};

const CRON_FIELD = /^[\d*/,\-A-Za-z?LW#]+$/;

/** Validates a trigger; `eventTypes` is the event catalog, `checkCron` throws on an expression the scheduler rejects. */
export function validateTrigger(raw: unknown, opts: { eventTypes: readonly string[]; checkCron?: (cron: string, tz: string) => void }): FlowTrigger {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) invalid('trigger', 'must be an object with a type');
  const t = raw as Record<string, unknown>;
  if (!(TRIGGER_TYPES as readonly unknown[]).includes(t.type)) invalid('trigger.type', `must be one of ${TRIGGER_TYPES.join(', ')}`, undefined, { expected: TRIGGER_TYPES });
  const type = t.type as TriggerType;
  const allowed: Record<TriggerType, string[]> = {
    api: [], webhook: [], event: ['event', 'filter'], inbound_message: ['channel', 'keyword', 'number'], schedule: ['cron', 'timezone'],
  };
  for (const key of Object.keys(t)) if (key !== 'type' && !allowed[type].includes(key)) invalid(`trigger.${key}`, `is not a setting of ${type} triggers`, undefined, { expected: allowed[type] });
  const out: FlowTrigger = { type };
  if (type === 'event') {
    if (typeof t.event !== 'string' || !opts.eventTypes.includes(t.event)) invalid('trigger.event', 'must be an event type of the catalog', undefined, { expected: opts.eventTypes });
    if (t.event === 'flow.execution.step') invalid('trigger.event', 'flow.execution.step cannot start a flow');
    out.event = t.event;
    if (t.filter !== undefined) out.filter = checkRules(t.filter, 'trigger.filter');
  }
  if (type === 'inbound_message') {
    if (t.channel !== undefined) {
      if (!(INBOUND_CHANNELS as readonly unknown[]).includes(t.channel)) invalid('trigger.channel', `must be one of ${INBOUND_CHANNELS.join(', ')}`);
      out.channel = t.channel as FlowTrigger['channel'];
    }
    if (t.keyword !== undefined) {
      if (typeof t.keyword !== 'string' || !/^\S{1,32}$/.test(t.keyword.trim())) invalid('trigger.keyword', 'must be one word of up to 32 characters');
      out.keyword = t.keyword.trim().toUpperCase();
    }
    if (t.number !== undefined) {
      if (typeof t.number !== 'string' || t.number.trim() === '' || t.number.length > 320) invalid('trigger.number', 'must be the receiving address (E.164 number or sender id)');
      out.number = t.number.trim();
    }
  }
  if (type === 'schedule') {
    if (typeof t.cron !== 'string' || !t.cron.trim().split(/\s+/).every((f) => CRON_FIELD.test(f)) || ![5, 6].includes(t.cron.trim().split(/\s+/).length)) {
      invalid('trigger.cron', 'must be a cron expression of 5 fields (minute hour day month weekday)');
    }
    const timezone = t.timezone === undefined ? 'UTC' : t.timezone;
    if (typeof timezone !== 'string' || !validTimeZone(timezone)) invalid('trigger.timezone', 'must be an IANA time zone such as Europe/Istanbul');
    try {
      opts.checkCron?.(t.cron.trim(), timezone);
    } catch (e) {
      invalid('trigger.cron', `is not a valid cron expression (${(e as Error).message})`);
    }
    out.cron = t.cron.trim();
    out.timezone = timezone;
  }
  return out;
}

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Validates the graph: shape, node configurations, one trigger, edges, reachability, cycles. */
export function validateDefinition(raw: unknown): FlowDefinition {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) invalid('definition', 'must be an object { nodes, edges }');
  const d = raw as Record<string, unknown>;
  for (const key of Object.keys(d)) if (key !== 'nodes' && key !== 'edges') invalid(`definition.${key}`, 'unknown key', undefined, { expected: ['nodes', 'edges'] });
  if (!Array.isArray(d.nodes) || d.nodes.length === 0) invalid('definition.nodes', 'must be a non-empty array');
  if (d.nodes.length > MAX_NODES) invalid('definition.nodes', `at most ${MAX_NODES} nodes`);
  const edgesRaw = d.edges ?? [];
  if (!Array.isArray(edgesRaw)) invalid('definition.edges', 'must be an array');
  if (edgesRaw.length > MAX_EDGES) invalid('definition.edges', `at most ${MAX_EDGES} edges`);

  const nodes: FlowNode[] = [];
  const index = new Map<string, number>();
  d.nodes.forEach((n: unknown, i: number) => nodes.push(checkNode(n, i, index)));
  const triggers = nodes.map((n, i) => [n, i] as const).filter(([n]) => n.type === 'trigger');
  if (triggers.length === 0) invalid('definition.nodes', 'a flow has exactly one node of type trigger (its entry); none found');
  if (triggers.length > 1) invalid(`definition.nodes.${triggers[1]![1]}.type`, 'a flow has exactly one node of type trigger', triggers[1]![0].id);
  const entry = triggers[0]![0];

  const edges: FlowEdge[] = [];
  const out = new Map<string, { edge: FlowEdge; at: number }[]>();
  edgesRaw.forEach((e: unknown, i: number) => {
    const at = `definition.edges.${i}`;
    if (e === null || typeof e !== 'object' || Array.isArray(e)) invalid(at, 'must be an object { from, to, branch? }');
    const edge = e as Record<string, unknown>;
    for (const key of Object.keys(edge)) if (!['from', 'to', 'branch'].includes(key)) invalid(`${at}.${key}`, 'unknown key', undefined, { expected: ['from', 'to', 'branch'] });
    if (typeof edge.from !== 'string' || !index.has(edge.from)) invalid(`${at}.from`, `no node has the id ${JSON.stringify(edge.from)}`, typeof edge.from === 'string' ? edge.from : undefined);
    const from = nodes[index.get(edge.from)!]!;
    if (typeof edge.to !== 'string' || !index.has(edge.to)) invalid(`${at}.to`, `no node has the id ${JSON.stringify(edge.to)} (dangling edge)`, from.id);
    if (edge.to === entry.id) invalid(`${at}.to`, 'no edge may lead into the trigger node', from.id);
    if (from.type === 'end') invalid(`${at}.from`, 'an end node has no outgoing edges', from.id);
    const branches = BRANCHES[from.type];
    if (branches) {
      if (typeof edge.branch !== 'string' || !branches.includes(edge.branch)) invalid(`${at}.branch`, `edges from a ${from.type} node name their branch: ${branches.join(' or ')}`, from.id, { expected: branches });
    } else if (edge.branch !== undefined) {
      invalid(`${at}.branch`, `${from.type} nodes have one unlabelled outgoing edge`, from.id);
    }
    const siblings = out.get(from.id) ?? [];
    if (siblings.some((s) => s.edge.branch === edge.branch)) {
      invalid(`${at}${edge.branch === undefined ? '.from' : '.branch'}`, edge.branch === undefined ? `node ${from.id} already has an outgoing edge` : `branch ${edge.branch} of node ${from.id} already has an edge`, from.id);
    }
    const clean: FlowEdge = { from: edge.from, to: edge.to, ...(edge.branch !== undefined ? { branch: edge.branch as string } : {}) };
    siblings.push({ edge: clean, at: i });
    out.set(from.id, siblings);
    edges.push(clean);
  });

  // Reachability from the trigger.
  const reached = new Set<string>([entry.id]);
  const queue = [entry.id];
  while (queue.length > 0) {
    for (const { edge } of out.get(queue.shift()!) ?? []) if (!reached.has(edge.to)) { reached.add(edge.to); queue.push(edge.to); }
  }
  const unreachable = nodes.findIndex((n) => !reached.has(n.id));
  if (unreachable >= 0) invalid(`definition.nodes.${unreachable}`, `node ${nodes[unreachable]!.id} cannot be reached from the trigger`, nodes[unreachable]!.id);

  // Cycles are allowed only through a wait: with the waits' outgoing edges removed, the graph must be acyclic.
  const state = new Map<string, 1 | 2>();
  const visit = (id: string): void => {
    state.set(id, 1);
    const node = nodes[index.get(id)!]!;
    if (!WAITS.has(node.type)) {
      for (const { edge, at } of out.get(id) ?? []) {
        const s = state.get(edge.to);
        if (s === 1) invalid(`definition.edges.${at}`, `this edge closes a cycle without a wait (${edge.from} → ${edge.to}); loops must pass through a wait or wait_for_reply node`, edge.from);
        if (s === undefined) visit(edge.to);
      }
    }
    state.set(id, 2);
  };
  for (const n of nodes) if (!state.has(n.id)) visit(n.id);
  return { nodes, edges };
}

function checkNode(raw: unknown, i: number, index: Map<string, number>): FlowNode {
  const at = `definition.nodes.${i}`;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) invalid(at, 'must be an object { id, type, config }');
  const n = raw as Record<string, unknown>;
  if (typeof n.id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(n.id)) invalid(`${at}.id`, 'must be 1-64 letters, digits, _ or -');
  const id = n.id;
  if (index.has(id)) invalid(`${at}.id`, `duplicate node id ${id}`, id);
  index.set(id, i);
  for (const key of Object.keys(n)) if (!['id', 'type', 'name', 'config'].includes(key)) invalid(`${at}.${key}`, 'unknown key', id, { expected: ['id', 'type', 'name', 'config'] });
  if (!(NODE_TYPES as readonly unknown[]).includes(n.type)) invalid(`${at}.type`, `unknown node type ${JSON.stringify(n.type)}`, id, { expected: NODE_TYPES });
  const type = n.type as NodeType;
  if (n.name !== undefined && (typeof n.name !== 'string' || n.name.length > 200)) invalid(`${at}.name`, 'must be a string of up to 200 characters', id);
  const parsed = CONFIGS[type].safeParse(n.config ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]!] : issue.path;
    invalid([`${at}.config`, ...path.map(String)].join('.'), issue.message, id);
  }
  const config = parsed.data as Record<string, unknown>;
  if (type === 'condition') config.rules = checkRules(config.rules, `${at}.config.rules`, id);
  if (type === 'wait' && typeof config.until === 'string' && !hasPlaceholder(config.until)) config.until = new Date(config.until).toISOString();
  return { id, type, ...(typeof n.name === 'string' ? { name: n.name } : {}), config };
}

/** The node an edge from `from` leads to along `branch` (undefined: the execution ends there). */
export function nextNode(def: FlowDefinition, from: string, branch?: string): string | undefined {
  return def.edges.find((e) => e.from === from && e.branch === branch)?.to;
}

/** The references a definition makes to other resources (checked against the tenant by the service). */
export function references(def: FlowDefinition): { node: string; field: string; kind: 'template' | 'list' | 'agent'; id: string }[] {
  const refs: { node: string; field: string; kind: 'template' | 'list' | 'agent'; id: string }[] = [];
  def.nodes.forEach((n, i) => {
    const at = `definition.nodes.${i}.config`;
    if (n.type === 'send_message' && typeof n.config.template_id === 'string') refs.push({ node: n.id, field: `${at}.template_id`, kind: 'template', id: n.config.template_id });
    if (n.type === 'add_to_list') refs.push({ node: n.id, field: `${at}.list_id`, kind: 'list', id: n.config.list_id as string });
    if (n.type === 'agent') refs.push({ node: n.id, field: `${at}.agent_id`, kind: 'agent', id: n.config.agent_id as string });
  });
  return refs;
}

/**
 * Events a node type causes each time it runs (or may, for a send's later statuses). A flow whose
 * event trigger is one of them, unfiltered, would start itself again from every execution.
 */
const CAUSES: Partial<Record<NodeType, readonly string[]>> = {
  send_message: ['message.queued', 'message.sent', 'message.delivered', 'message.read', 'message.failed'],
  update_contact: ['contact.updated'],
  add_tag: ['contact.updated'],
  webhook_event: ['flow.custom_event'],
};

/**
 * Refuses a flow whose trigger matches what the flow itself causes (VALIDATION_ERROR on
 * `trigger.event`, `details.node` the node that causes it): an unfiltered event trigger on an
 * event one of its nodes causes (`message.*` and send_message, `contact.updated` and
 * update_contact / add_tag, `flow.custom_event` and webhook_event), or on
 * `flow.execution.completed`, which every execution of the flow emits. A trigger with a filter is
 * accepted (the filter may leave the flow's own events out; chains stop at the chain depth anyway).
 */
export function checkSelfTrigger(trigger: FlowTrigger, def: FlowDefinition): void {
  if (trigger.type !== 'event' || trigger.filter !== undefined || !trigger.event) return;
  const advice = 'add a trigger filter that leaves out what this flow causes (events a flow caused carry data.depth: {"field": "data.depth", "op": "not_exists"} leaves them all out) or trigger on another event';
  if (trigger.event === 'flow.execution.completed') {
    invalid('trigger.event', `every execution of this flow ends with flow.execution.completed, so each would start another one; ${advice}`, undefined, { value: trigger.event, reason: 'self_trigger' });
  }
  const node = def.nodes.find((n) => CAUSES[n.type]?.includes(trigger.event!));
  if (!node) return;
  invalid('trigger.event', `this flow's own ${node.type} node ${JSON.stringify(node.id)} causes ${trigger.event} events, so each execution would start another one; ${advice}`, node.id,
    { value: trigger.event, reason: 'self_trigger' });
}
