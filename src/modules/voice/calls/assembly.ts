/**
 * The call machinery built from what the manifest hands it, each part given the parts beneath it:
 * the row locks (store/locked.ts), where calls go (routes.ts), the lifecycle (lifecycle.ts), the
 * IVR runner (ivr/runner.ts), the gateway side (gateway.ts), the lookups and placing (placing/),
 * transfers (transfers.ts), inbound calls (inbound/router.ts) and the calls service (calls.service.ts) on top.
 * Dialing (dialing.ts) is built beside conferences, which it joins calls to (the module's index.ts).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Ports } from '../../manifest.ts';
import type { Config } from '../../../config.ts';
import type { Clock } from '../../../platform/clock.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import type { Rider } from '../../../platform/db/pairedReads.ts';
import type { LiveNotice } from '../../../platform/events/bus.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { CursorCodec } from '../../../platform/pagination.ts';
import type { CounterTake, CounterTaken } from '../../../platform/ratelimit/limiter.ts';
import type { TrunkOrder, VoiceGateways } from '../../../providers/voice/types.ts';
import { InboundCalls } from '../inbound/router.ts';
import { IvrRunner } from '../ivr/runner.ts';
import { CallLookupReads } from '../placing/lookups.ts';
import { CallPlacing } from '../placing/placing.service.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import type { SandboxTimeline } from '../sandbox/timeline.ts';
import { CallRows, LockedCalls } from '../store/locked.ts';
import type { CallBilling } from '../voice.billing.ts';
import type { VoicePhi } from '../voice.phi.ts';
import type { CallConsentPort, VoiceAgentsPort, VoiceNumbersPort } from '../voice.ports.ts';
import type { VoicemailService } from '../voicemail/voicemail.service.ts';
import { CallsService } from './calls.service.ts';
import { CallGateway } from './gateway.ts';
import { CALL_TIMER_JOB, CallLifecycle, type CallTimer } from './lifecycle.ts';
import { CallRoutes } from './routes.ts';
import { CallTransfers } from './transfers.ts';

/** What the call machinery is built from. */
export type CallsDeps = {
  orm: MikroORM; pool: Pool; clock: Clock; config: Config; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; gateways: VoiceGateways;
  /** Warnings (inbound calls refused). */
  log?: (message: string, detail: Record<string, unknown>) => void;
  numbers: VoiceNumbersPort; agents: () => VoiceAgentsPort | undefined; links: RecordingLinks; voicemail: VoicemailService; phi: VoicePhi;
  /** Plan quotas (billing, optional): a starter plan past its included voice minutes is 429 QUOTA_EXCEEDED. */
  quotas?: () => Ports['planQuotas'] | undefined;
  /** The organization's SIP trunk for live calls (none: live calls are CHANNEL_UNAVAILABLE). */
  trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  /** Live calls paid from credits (voice.billing.ts); without it calls are not charged. */
  billing?: CallBilling;
  /** Voice consent (contacts, optional): an opted-out number is not called (RECIPIENT_OPTED_OUT). */
  consent?: () => CallConsentPort | undefined;
  /** The sandbox gateway's timeline: test calls are placed from it (else by the placement job). */
  timeline?: SandboxTimeline;
  /** This instance's live subscribers, told of committed call changes at once (EventBus.deliverLocal). */
  live?: (notices: readonly LiveNotice[]) => void;
  /** Whether a live subscriber of this instance watches the call now (else its committed state is not kept for one). */
  watched?: (callId: string) => boolean;
  /** The rate limiter's takes, carried by the lookups' statement (placing/lookups.ts); absent: they go alone. */
  takes?: Rider<CounterTake, CounterTaken>;
};

/** The parts the manifest hands on: to the operations, the jobs, the sandbox timeline, the SIP gateway's inbound router, conferences. */
export type CallParts = {
  calls: CallsService; placing: CallPlacing; gateway: CallGateway; lifecycle: CallLifecycle; routes: CallRoutes; lookups: CallLookupReads; inbound: InboundCalls;
  /** The row locks and reads (dialing: calls/dialing.ts). */
  locks: LockedCalls<CallTimer>; rows: CallRows;
};

export function assembleCalls(deps: CallsDeps): CallParts {
  const lookups = new CallLookupReads({ pool: deps.pool, numbers: deps.numbers, consent: deps.consent ?? (() => undefined), ...(deps.takes ? { takes: deps.takes } : {}) });
  const routes = new CallRoutes({ gateways: deps.gateways, trunk: deps.trunk, policy: { allowLoopback: deps.config.allowLoopback } });
  const rows = new CallRows({ orm: deps.orm, pool: deps.pool, jobs: deps.jobs, timerJob: CALL_TIMER_JOB });
  const locks = new LockedCalls<CallTimer>({
    orm: deps.orm, clock: deps.clock, rows, timeline: deps.timeline,
    live: deps.live, watched: deps.watched ?? (() => deps.live !== undefined),
  });
  const lifecycle = new CallLifecycle({
    jobs: deps.jobs, gateways: deps.gateways, locks, timerRows: deps.timeline !== undefined, billing: deps.billing, voicemail: deps.voicemail, agents: deps.agents,
    log: deps.log ?? (() => {}),
  });
  const ivr = new IvrRunner(lifecycle, deps.voicemail);
  const gateway = new CallGateway({ pool: deps.pool, locks, lifecycle, routes, ivr });
  const placing = new CallPlacing({
    orm: deps.orm, clock: deps.clock, pool: deps.pool, jobs: deps.jobs, timeline: deps.timeline, lookups,
    billing: deps.billing, quotas: deps.quotas ?? (() => undefined), agents: deps.agents, phi: deps.phi, lifecycle, routes, locks, links: deps.links,
  });
  const transfers = new CallTransfers({ pool: deps.pool, placing, routes });
  lifecycle.installTransfers(transfers);
  const inbound = new InboundCalls({ pool: deps.pool, placing, transfers, numbers: deps.numbers, log: deps.log ?? (() => {}) });
  const calls = new CallsService({
    orm: deps.orm, clock: deps.clock, cursors: deps.cursors, rows, locks, lifecycle, routes, ivr, links: deps.links, phi: deps.phi, billing: deps.billing,
  });
  return { calls, placing, gateway, lifecycle, routes, lookups, inbound, locks, rows };
}
