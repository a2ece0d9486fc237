/**
 * HIPAA housekeeping of flow executions (batched, idempotent, safe with several instances: see
 * platform/phiHousekeeping.ts):
 * - retention: executions that finished before the organization's retention period lose their
 *   content: the context (trigger, input, step outputs) and every step's input and output; error
 *   messages become generic. Rows, statuses, node ids and types, error codes and timings stay
 *   (`content_purged_at` set). Running and waiting executions are never purged.
 * - backfill: executions and steps stored in clear before the mode was on are sealed (an execution
 *   running when the mode came on seals itself at its next step; its earlier steps are sealed here).
 */
import { ContextHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { ExecutionError } from './flows.entities.ts';
import { sealExecution, sealStep } from './flows.phi.ts';

/** What a purged error message reads as (SQL; the node and code stay). */
const PURGED_ERROR = `case when x.error is null then null
  else jsonb_build_object('node', x.error->'node', 'code', x.error->'code', 'message', 'purged: past the HIPAA retention period') end`;

export class FlowRetention extends ContextHousekeeping {
  /** Purges the content of executions finished before their organization's retention period; returns how many rows (steps and executions). */
  purgeExpired(): Promise<number> {
    // Steps first (their execution is not marked purged yet), then the executions.
    return this.housekeeping.purge([`
        with picked as (
          select s.id from flow_execution_steps s join flow_executions e on e.id = s.execution_id
           where e.organization_id = $1 and e.finished_at < $2 and e.content_purged_at is null and $3::timestamptz is not null
             and (s.input is not null or s.output is not null or s.phi is not null)
           order by s.id limit $4 for update of s)
        update flow_execution_steps x set input = null, output = null, phi = null, error = ${PURGED_ERROR}
          from picked where x.id = picked.id`, `
        with picked as (
          select id from flow_executions where organization_id = $1 and finished_at < $2 and content_purged_at is null
           order by id limit $4 for update)
        update flow_executions x set context = jsonb_build_object('execution', x.context->'execution'), phi = null,
               error = ${PURGED_ERROR}, content_purged_at = $3
          from picked where x.id = picked.id`]);
  }

  /** Seals executions and steps stored in clear before the organization's HIPAA mode was on; returns how many rows. */
  async sealBackfill(): Promise<number> {
    const executions = await this.housekeeping.backfill('flow_executions', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; context: Record<string, unknown>; error: ExecutionError | null }>(
        `select id, context, error from flow_executions where organization_id = $1 and created_at <= $2 and phi is null and content_purged_at is null
          order by id limit $3 for update`, [organizationId, until, limit]);
      const sealed = rows.map((r) => ({ id: r.id, ...sealExecution(r.id, r.context, r.error, codec) }));
      if (sealed.length > 0) {
        await client.query(
          `update flow_executions e set context = s.context, error = s.error, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, context jsonb, error jsonb, phi text) where e.id = s.id`, [JSON.stringify(sealed)]);
      }
      return { picked: rows.length, changed: rows.length };
    });
    const steps = await this.housekeeping.backfill('flow_execution_steps', async (client, { organizationId, until, limit, codec }) => {
      const { rows } = await client.query<{ id: string; input: Record<string, unknown> | null; output: Record<string, unknown> | null; error: ExecutionError | null }>(
        `select s.id, s.input, s.output, s.error from flow_execution_steps s
          where s.organization_id = $1 and s.started_at <= $2 and s.phi is null and (s.input is not null or s.output is not null or s.error is not null)
            and not exists (select 1 from flow_executions e where e.id = s.execution_id and e.content_purged_at is not null)
          order by s.id limit $3 for update of s`, [organizationId, until, limit]);
      const sealed = rows.map((r) => ({ id: r.id, ...sealStep(r.id, { input: r.input, output: r.output, error: r.error }, codec) }));
      if (sealed.length > 0) {
        await client.query(
          `update flow_execution_steps x set input = null, output = null, error = s.error, phi = s.phi
             from jsonb_to_recordset($1::jsonb) as s(id text, error jsonb, phi text) where x.id = s.id`, [JSON.stringify(sealed)]);
      }
      return { picked: rows.length, changed: rows.length };
    });
    return executions + steps;
  }
}
