/** Flows context: flows (current version), every saved version, executions and their step log. */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type { FlowDefinition, FlowTrigger, TriggerType } from './flows.graph.ts';

export const EXECUTION_STATUSES = ['running', 'waiting', 'completed', 'failed', 'cancelled'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
export const STEP_STATUSES = ['completed', 'waiting', 'failed'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];
export type ExecutionError = { node: string | null; code: string; message: string };

export const Flow = defineEntity({
  name: 'Flow',
  tableName: 'flows',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    triggerType: p.string().$type<TriggerType>(),
    trigger: p.json<FlowTrigger>(),
    definition: p.json<FlowDefinition>(),
    /** 1 at creation, incremented by every accepted update. */
    version: p.integer(),
    /** The webhook trigger's HMAC key (sealed); shown once, when the webhook trigger is set. */
    webhookSecret: p.string().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    /** Deleted flows start nothing; their running executions finish on their pinned version. */
    deletedAt: p.datetime().nullable(),
  },
});
export type Flow = InferEntity<typeof Flow>;

/** Every saved version of a flow, immutable: executions run the version that started them. */
export const FlowVersion = defineEntity({
  name: 'FlowVersion',
  tableName: 'flow_versions',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    flowId: p.string(),
    version: p.integer(),
    name: p.string(),
    trigger: p.json<FlowTrigger>(),
    definition: p.json<FlowDefinition>(),
    createdAt: p.datetime(),
  },
});
export type FlowVersion = InferEntity<typeof FlowVersion>;

export const FlowExecution = defineEntity({
  name: 'FlowExecution',
  tableName: 'flow_executions',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    flowId: p.string(),
    flowVersion: p.integer(),
    status: p.string().$type<ExecutionStatus>(),
    triggerType: p.string().$type<TriggerType>(),
    /** `{ trigger, input, steps: { <node id>: output }, execution }`: what templates and conditions read. */
    context: p.json<Record<string, unknown>>(),
    /** Sequence number of the step to run next (the job for it carries the same number). */
    cursor: p.integer(),
    currentNodeId: p.string().nullable(),
    /** While waiting for a reply: `{ address, channel, until }`. */
    waiting: p.json<{ address: string; channel: string | null; until: string } | null>().nullable(),
    error: p.json<ExecutionError | null>().nullable(),
    stepsCount: p.integer(),
    /** HIPAA mode: the context but its `execution` ids, and the error message, sealed (flows.phi.ts). */
    phi: p.text().nullable(),
    /** Set by the HIPAA retention job when the execution's content (context, step log) was purged. */
    contentPurgedAt: p.datetime().nullable(),
    /**
     * How deep in a chain of flow executions: 0 for a start no flow caused; an execution started by
     * what another one did (its messages, contact changes and events carry `data.depth`) is one
     * deeper. A start past FLOWS_MAX_CHAIN_DEPTH is recorded refused (flows.triggers.ts).
     */
    depth: p.integer(),
    /** A start recorded failed without running (chain depth, per-minute cap, concurrency limit): not counted by the per-minute cap. */
    refused: p.boolean(),
    /** The delivery id a webhook trigger call was signed with: a replay of it answers with this execution. */
    deliveryId: p.string().nullable(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    finishedAt: p.datetime().nullable(),
  },
});
export type FlowExecution = InferEntity<typeof FlowExecution>;

export const FlowStep = defineEntity({
  name: 'FlowStep',
  tableName: 'flow_execution_steps',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    executionId: p.string(),
    seq: p.integer(),
    nodeId: p.string(),
    nodeType: p.string(),
    status: p.string().$type<StepStatus>(),
    input: p.json<Record<string, unknown> | null>().nullable(),
    output: p.json<Record<string, unknown> | null>().nullable(),
    error: p.json<ExecutionError | null>().nullable(),
    /** HIPAA mode: input, output and error, sealed (flows.phi.ts); the clear columns then hold null and a generic error. */
    phi: p.text().nullable(),
    startedAt: p.datetime(),
    finishedAt: p.datetime().nullable(),
    durationMs: p.integer().nullable(),
  },
});
export type FlowStep = InferEntity<typeof FlowStep>;
