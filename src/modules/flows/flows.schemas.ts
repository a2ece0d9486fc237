/** Input schemas of the flows context (REST wire shape). Triggers and definitions are checked by flows.graph.ts. */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { EXECUTION_STATUSES } from './flows.entities.ts';

const name = z.string().trim().min(1).max(200);

export const createFlowInput = z.object({
  name,
  trigger: z.unknown(),
  definition: z.unknown(),
});
export type CreateFlowInput = z.infer<typeof createFlowInput>;

export const updateFlowInput = createFlowInput.partial().extend({
  id: z.string().min(1).max(100),
  /** Optimistic concurrency: the version the client read; a different stored version is CONFLICT. */
  expected_version: z.number().int().min(1).nullish(),
});
export type UpdateFlowInput = z.infer<typeof updateFlowInput>;

export const flowVersionInput = z.object({ id: z.string().min(1).max(100), version: z.number().int().min(1) });
export const listFlowVersionsInput = pageInput.extend({ id: z.string().min(1).max(100) });

export const listExecutionsInput = pageInput.extend({
  flow_id: z.string().min(1).max(100).nullish(),
  status: z.enum(EXECUTION_STATUSES).nullish(),
});
export type ListExecutionsInput = z.infer<typeof listExecutionsInput>;

export const startExecutionInput = z.object({
  id: z.string().min(1).max(100),
  input: z.record(z.string(), z.unknown()).nullish(),
});

/** `id` is the flow (REST path); GraphQL may read an execution by its own id alone. */
export const executionInput = z.object({ id: z.string().min(1).max(100).nullish(), execution_id: z.string().min(1).max(100) });
