/**
 * Flows: event-triggered automation. Versioned node graphs validated at save time; durable
 * executions on pg-boss (a job runs its step and the internal steps after it; the jobs run at one
 * moment are gathered into one transaction per tenant); triggers from the events outbox (event,
 * inbound_message), a signed webhook, pg-boss schedules and the API. Sends through messaging
 * (`messageSender`), contact changes through contacts (`flowContacts`), message bodies and
 * template lookups through messaging (`flowMessages`), agents through `flowAgents` when installed.
 * HIPAA mode (`phi` port, when installed): execution contexts and step logs sealed, read by the PHI
 * access rules, purged after the retention period (flows.phi.ts, flows.retention.ts).
 */
import { defineModule } from '../manifest.ts';
import { flowsConfig } from './flows.config.ts';
import { Flow, FlowExecution, FlowStep, FlowVersion } from './flows.entities.ts';
import { FlowsService } from './flows.service.ts';
import { ExecutionsService } from './executions.service.ts';
import { ExecutionEngine } from './executions.engine.ts';
import { NodeRunner } from './flows.nodes.ts';
import { TriggerConsumer } from './flows.triggers.ts';
import { FlowPhi } from './flows.phi.ts';
import { FlowRetention } from './flows.retention.ts';
import { StrandedExecutions } from './executions.sweep.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { pgBossScheduler, registerFlowJobs } from './flows.jobs.ts';
import { flowRoutes } from './flows.rest.ts';
import { FLOW_EVENTS } from './flows.ports.ts';
import type { FlowsServices } from './flows.operations.ts';
import './flows.graphql.ts';

export { FLOW_EVENTS };
type FlowsModule = FlowsServices & { flowEngine: ExecutionEngine; flowTriggers: TriggerConsumer; flowRetention: FlowRetention; flowStranded: StrandedExecutions };

/** Flows's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { flw: 'Flow', flv: 'FlowVersion', fex: 'FlowExecution', fst: 'FlowExecutionStep' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

export const flowsModule = defineModule({
  name: 'flows',
  config: flowsConfig,
  entities: [Flow, FlowVersion, FlowExecution, FlowStep],
  ids,
  events: FLOW_EVENTS,
  requires: ['messageSender', 'flowContacts', 'flowMessages'],
  optional: ['flowAgents', 'phi'],
  create: (p, ports): FlowsModule => {
    const urlPolicy = { allowLoopback: p.config.allowLoopback };
    const agents = ports.optional('flowAgents');
    const contacts = ports('flowContacts');
    const messages = ports('flowMessages');
    const flows = new FlowsService({
      orm: p.orm, clock: p.clock, cursors: p.cursors, appSecret: p.config.appSecret, urlPolicy, eventTypes: p.eventTypes,
      scheduler: pgBossScheduler(p.jobs), messages, contacts, agents,
    });
    const phi = new FlowPhi(ports.optional('phi'));
    const nodes = new NodeRunner({ clock: p.clock, urlPolicy, messages: ports('messageSender'), contacts, agents });
    const flowEngine = new ExecutionEngine({ orm: p.orm, clock: p.clock, log: p.log, jobs: p.jobs, nodes, phi, maxSteps: p.config.flows.maxSteps });
    const limits = { maxActive: p.config.flows.maxActiveExecutions, perMinute: p.config.flows.maxExecutionsPerMinute };
    const flowExecutions = new ExecutionsService({
      orm: p.orm, clock: p.clock, cursors: p.cursors, jobs: p.jobs, flows, engine: flowEngine, phi, limits, webhookToleranceSeconds: p.config.flows.webhookToleranceSeconds,
    });
    const flowTriggers = new TriggerConsumer({ clock: p.clock, log: p.log, jobs: p.jobs, messages, phi, limits, maxChainDepth: p.config.flows.maxChainDepth });
    const flowRetention = new FlowRetention(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize }));
    const flowStranded = new StrandedExecutions({ orm: p.orm, clock: p.clock, jobs: p.jobs, leaseSeconds: p.config.flows.stepExpireSeconds });
    return { flows, flowExecutions, flowEngine, flowTriggers, flowRetention, flowStranded };
  },
  routes: flowRoutes,
  jobs: (registry, s, p) => registerFlowJobs(registry, { engine: s.flowEngine, executions: s.flowExecutions, retention: s.flowRetention, stranded: s.flowStranded, concurrency: p.config.flows.concurrency, batchSize: p.config.flows.batchSize, expireSeconds: p.config.flows.stepExpireSeconds,
  }),
  callbacks: (s) => ({
    // A webhook-triggered flow is called at /v1/providers/flows/callbacks, signed with its webhook secret (flows.webhook.ts).
    flows: async (_provider, raw, signature) => {
      const ex = await s.flowExecutions.startWebhook(raw, signature);
      return { execution_id: ex.id, flow_id: ex.flowId, status: ex.status };
    },
  }),
  workers: (s, p) => {
    // Event and inbound_message triggers (and replies to wait_for_reply) ride the outbox relay's transaction.
    p.relay.addConsumer((tx, event) => s.flowTriggers.consume(tx, event));
    return { start: () => {}, stop: async () => {} };
  },
});
