/**
 * Transfers of live calls to a number: an inbound call whose number's `voice_route` is `forward`
 * (inbound/router.ts), or an IVR option or fallback `transfer_number` (ivr/runner.ts through the
 * lifecycle). The second leg is a call of its own (outbound, from our number, `metadata.transferred_call_id`
 * naming the first), stored here with its `call.initiated` event and minutes reserved; the SIP
 * gateway holding the first call places it on the organization's trunk and bridges the two once it
 * answers (VoiceGateway.bridge), and reports how each leg ends: usage, billing and `call.*` events
 * follow for both as for any call.
 */
import type { Pool } from 'pg';
import { systemScope, type Scope } from '../../../platform/auth/scope.ts';
import { organizationPlan } from '../../../platform/tenancy/plan.ts';
import { GatewayError, type CallOrder } from '../../../providers/voice/types.ts';
import type { CallPlacing } from '../placing/placing.service.ts';
import type { Call } from '../voice.entities.ts';
import { CALL_MAX_DURATION } from '../voice.schemas.ts';
import type { CallRoutes } from './routes.ts';
import type { TransferHooks } from './lifecycle.ts';

type FirstLeg = Pick<Call, 'id' | 'organizationId' | 'mode' | 'direction' | 'from' | 'to' | 'record'>;

export class CallTransfers implements TransferHooks {
  readonly #pool: Pool;
  readonly #placing: CallPlacing;
  readonly #routes: CallRoutes;

  constructor(deps: { pool: Pool; placing: CallPlacing; routes: CallRoutes }) {
    this.#pool = deps.pool;
    this.#placing = deps.placing;
    this.#routes = deps.routes;
  }

  /** The second leg of `call` transferred to `number` (the organization's plan read for its scope). */
  async leg(call: FirstLeg, number: string): Promise<CallOrder> {
    const plan = await organizationPlan(this.#pool, call.organizationId);
    if (!plan) throw new Error(`organization ${call.organizationId} not found`);
    return this.legIn(systemScope(call.organizationId, call.mode, plan, `transfer-${call.id}`), call, number);
  }

  /** The second leg, stored in `scope`: from our number (the one called, or the one calling out), to `number`, on the trunk. */
  async legIn(scope: Scope, call: FirstLeg, number: string): Promise<CallOrder> {
    const trunk = await this.#routes.trunk(scope);
    if (!trunk) throw new GatewayError('the account has no SIP trunk any more');
    const ours = call.direction === 'inbound' ? call.to : call.from;
    const leg = await this.#placing.transferLeg(scope, {
      to: number, from: ours, agentId: null, ivrId: null, conferenceId: null, webhookUrl: null, record: call.record,
      maxDuration: CALL_MAX_DURATION.default, metadata: { transferred_call_id: call.id },
    });
    return { callId: leg.id, from: leg.from, to: leg.to, record: leg.record, trunk };
  }
}
