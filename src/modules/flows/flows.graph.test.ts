import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../platform/errors.ts';
import { checkSelfTrigger, nextNode, references, validateDefinition, validateTrigger, type FlowDefinition } from './flows.graph.ts';

const ok = {
  nodes: [
    { id: 't', type: 'trigger' },
    { id: 'c', type: 'condition', config: { rules: { all: [{ field: 'input.vip', op: 'eq', value: true }] } } },
    { id: 's', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'Hi {{input.name}}' } },
    { id: 'w', type: 'wait', config: { seconds: 0 } },
    { id: 'e', type: 'end' },
  ],
  edges: [
    { from: 't', to: 'c' }, { from: 'c', to: 's', branch: 'true' }, { from: 'c', to: 'e', branch: 'false' }, { from: 's', to: 'w' }, { from: 'w', to: 'e' },
  ],
};

function errorOf(fn: () => unknown): { code: string; details: Record<string, unknown> } {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return { code: (e as ServiceError).code, details: (e as ServiceError).details };
  }
  throw new Error('expected a validation error');
}

const clone = () => structuredClone(ok) as { nodes: Record<string, unknown>[]; edges: Record<string, unknown>[] };

describe('validateDefinition', () => {
  it('accepts a valid graph and follows branches', () => {
    const def = validateDefinition(ok);
    expect(def.nodes).toHaveLength(5);
    expect(nextNode(def, 'c', 'true')).toBe('s');
    expect(nextNode(def, 'c', 'false')).toBe('e');
    expect(nextNode(def, 'e')).toBeUndefined();
  });

  it('names the node and field of an invalid node configuration', () => {
    const d = clone();
    d.nodes[2]!.config = { channel: 'sms', to: '+15551234567' };
    expect(errorOf(() => validateDefinition(d)).details).toEqual({ node: 's', field: 'definition.nodes.2.config.body' });
    d.nodes[2]!.config = { channel: 'fax', to: 'x', body: 'b' };
    expect(errorOf(() => validateDefinition(d)).details).toEqual({ node: 's', field: 'definition.nodes.2.config.channel' });
    d.nodes[2]!.config = { channel: 'sms', to: 'x', body: 'b', colour: 'red' };
    expect(errorOf(() => validateDefinition(d)).details).toEqual({ node: 's', field: 'definition.nodes.2.config.colour' });
  });

  it('rejects unknown node types and duplicate ids', () => {
    const d = clone();
    d.nodes[3]!.type = 'teleport';
    expect(errorOf(() => validateDefinition(d)).details).toMatchObject({ node: 'w', field: 'definition.nodes.3.type' });
    const dup = clone();
    dup.nodes[4]!.id = 's';
    expect(errorOf(() => validateDefinition(dup)).details).toEqual({ node: 's', field: 'definition.nodes.4.id' });
  });

  it('wants exactly one trigger', () => {
    const none = clone();
    none.nodes[0]!.type = 'end';
    expect(errorOf(() => validateDefinition(none)).details.field).toBe('definition.nodes');
    const two = clone();
    two.nodes[4] = { id: 'e', type: 'trigger' };
    expect(errorOf(() => validateDefinition(two)).details).toEqual({ node: 'e', field: 'definition.nodes.4.type' });
  });

  it('rejects dangling edges, missing branches and unreachable nodes', () => {
    const dangling = clone();
    dangling.edges[3] = { from: 's', to: 'nowhere' };
    expect(errorOf(() => validateDefinition(dangling)).details).toEqual({ node: 's', field: 'definition.edges.3.to' });
    const noBranch = clone();
    delete noBranch.edges[1]!.branch;
    expect(errorOf(() => validateDefinition(noBranch)).details).toMatchObject({ node: 'c', field: 'definition.edges.1.branch' });
    const unreachable = clone();
    unreachable.edges = unreachable.edges.filter((e) => e.to !== 'w');
    unreachable.edges[unreachable.edges.length - 1] = { from: 's', to: 'e' };
    expect(errorOf(() => validateDefinition(unreachable)).details).toEqual({ node: 'w', field: 'definition.nodes.3' });
  });

  it('allows cycles only through a wait', () => {
    const loop = clone();
    // s → w → c: the loop passes through the wait.
    loop.edges[4] = { from: 'w', to: 'c' };
    loop.edges.push({ from: 't', to: 'e' });
    loop.edges[0] = { from: 't', to: 'c' };
    loop.edges.pop();
    loop.edges[2] = { from: 'c', to: 'e', branch: 'false' };
    expect(() => validateDefinition(loop)).not.toThrow();
    const tight = clone();
    // s → c without a wait: rejected at the edge that closes the cycle.
    tight.edges[3] = { from: 's', to: 'c' };
    tight.edges[4] = { from: 'w', to: 'e' };
    tight.nodes.splice(3, 1);
    tight.edges.splice(4, 1);
    expect(errorOf(() => validateDefinition(tight)).details).toEqual({ node: 's', field: 'definition.edges.3' });
  });

  it('checks condition rules with their exact path', () => {
    const d = clone();
    d.nodes[1]!.config = { rules: { all: [{ field: 'input.vip', op: 'resembles', value: 1 }] } };
    expect(errorOf(() => validateDefinition(d)).details).toMatchObject({ node: 'c', field: 'definition.nodes.1.config.rules.all.0.op' });
  });

  it('lists references to templates, lists and agents', () => {
    const d = clone();
    d.nodes[2]!.config = { channel: 'sms', to: '{{input.phone}}', template_id: 'tpl_1' };
    d.nodes[3] = { id: 'w', type: 'add_to_list', config: { contact_id: '{{input.contact_id}}', list_id: 'lst_1' } };
    expect(references(validateDefinition(d))).toEqual([
      { node: 's', field: 'definition.nodes.2.config.template_id', kind: 'template', id: 'tpl_1' },
      { node: 'w', field: 'definition.nodes.3.config.list_id', kind: 'list', id: 'lst_1' },
    ]);
  });
});

describe('validateTrigger', () => {
  const eventTypes = ['message.delivered', 'contact.created', 'flow.execution.step'];
  it('accepts each trigger type with its settings', () => {
    expect(validateTrigger({ type: 'api' }, { eventTypes })).toEqual({ type: 'api' });
    expect(validateTrigger({ type: 'event', event: 'message.delivered', filter: { field: 'data.channel', op: 'eq', value: 'sms' } }, { eventTypes }).event).toBe('message.delivered');
    expect(validateTrigger({ type: 'inbound_message', channel: 'sms', keyword: ' join ' }, { eventTypes })).toEqual({ type: 'inbound_message', channel: 'sms', keyword: 'JOIN' });
    expect(validateTrigger({ type: 'schedule', cron: '0 9 * * 1', timezone: 'Europe/Istanbul' }, { eventTypes })).toEqual({ type: 'schedule', cron: '0 9 * * 1', timezone: 'Europe/Istanbul' });
  });
  it('names the field of an invalid trigger', () => {
    expect(errorOf(() => validateTrigger({ type: 'carrier_pigeon' }, { eventTypes })).details.field).toBe('trigger.type');
    expect(errorOf(() => validateTrigger({ type: 'event', event: 'nope.happened' }, { eventTypes })).details.field).toBe('trigger.event');
    expect(errorOf(() => validateTrigger({ type: 'event', event: 'flow.execution.step' }, { eventTypes })).details.field).toBe('trigger.event');
    expect(errorOf(() => validateTrigger({ type: 'schedule', cron: 'every day' }, { eventTypes })).details.field).toBe('trigger.cron');
    expect(errorOf(() => validateTrigger({ type: 'schedule', cron: '0 9 * * *', timezone: 'Mars/Olympus' }, { eventTypes })).details.field).toBe('trigger.timezone');
    expect(errorOf(() => validateTrigger({ type: 'api', cron: '* * * * *' }, { eventTypes })).details.field).toBe('trigger.cron');
    expect(errorOf(() => validateTrigger({ type: 'schedule', cron: '0 9 * * *' }, { eventTypes, checkCron: () => { throw new Error('bad'); } })).details.field).toBe('trigger.cron');
  });
});

describe('checkSelfTrigger', () => {
  const def = (...nodes: { id: string; type: string; config?: Record<string, unknown> }[]) => ({
    nodes: [{ id: 't', type: 'trigger', config: {} }, ...nodes.map((n) => ({ config: {}, ...n }))],
    edges: nodes.map((n, i) => ({ from: i === 0 ? 't' : nodes[i - 1]!.id, to: n.id })),
  }) as FlowDefinition;
  const send = { id: 'send', type: 'send_message' };

  it('refuses an unfiltered event trigger on what one of its nodes causes, naming the node', () => {
    for (const event of ['message.queued', 'message.sent', 'message.delivered', 'message.read', 'message.failed']) {
      expect(errorOf(() => checkSelfTrigger({ type: 'event', event }, def(send)))).toEqual({
        code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'send', value: event, reason: 'self_trigger' },
      });
    }
    expect(errorOf(() => checkSelfTrigger({ type: 'event', event: 'contact.updated' }, def({ id: 'u', type: 'update_contact' }))).details.node).toBe('u');
    expect(errorOf(() => checkSelfTrigger({ type: 'event', event: 'contact.updated' }, def({ id: 'a', type: 'add_tag' }))).details.node).toBe('a');
    expect(errorOf(() => checkSelfTrigger({ type: 'event', event: 'flow.custom_event' }, def({ id: 'w', type: 'webhook_event' }))).details.node).toBe('w');
    // Every execution ends with flow.execution.completed when it completes.
    expect(errorOf(() => checkSelfTrigger({ type: 'event', event: 'flow.execution.completed' }, def({ id: 'e', type: 'end' }))).details).toMatchObject({ field: 'trigger.event', value: 'flow.execution.completed' });
  });

  it('accepts a filtered trigger, other events, other triggers and nodes that cause nothing it listens to', () => {
    expect(() => checkSelfTrigger({ type: 'event', event: 'message.queued', filter: { field: 'data.depth', op: 'not_exists' } }, def(send))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'event', event: 'message.received' }, def(send))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'event', event: 'contact.created' }, def({ id: 'a', type: 'add_tag' }))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'event', event: 'contact.updated' }, def({ id: 'l', type: 'add_to_list' }))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'event', event: 'flow.execution.failed' }, def(send))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'inbound_message' }, def(send))).not.toThrow();
    expect(() => checkSelfTrigger({ type: 'api' }, def(send))).not.toThrow();
  });
});
