/**
 * Inbound calls on live SIP trunks: an INVITE the SIP gateway received (providers/voice/sip) is
 * routed here. Its source must be one of the `origination_uris` of a live trunk (the URI's host,
 * compared as written and as resolved): else 403. The called number must be an active live voice
 * number of that trunk's organization: else 404. The number's `voice_route` (numbers port
 * `voiceNumbers`) decides the call: `ivr` runs the flow once answered; `voicemail` has the gateway
 * take a message into the box (its greeting, a beep, the caller recorded until silence, `#`,
 * hangup or the box's max_duration: MessageOrder), the message's id chosen here so the recording
 * and the message share it; `forward` answers the call and transfers it to the route's number once
 * answered (calls/transfers.ts: a second leg on the trunk, bridged when it answers); with no route,
 * `agent_id` routes to the agent, unless the number is the dial-in number of a live conference not
 * ended: the caller is then asked for a PIN (conferences.service.ts) and joins the conference it
 * opens; with none of these the INVITE is refused 480. An
 * accepted call is stored like a placed one (`initiating`, `call.initiated`, its minutes
 * reserved), with `direction: inbound`; the gateway answers it and reports `answered`, from which
 * it goes as outbound calls do.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Pool } from 'pg';
import { systemScope } from '../../../platform/auth/scope.ts';
import type { Plan } from '../../../platform/tenancy/tenancy.entities.ts';
import type { InboundDecision, InboundOffer, MessageOrder } from '../../../providers/voice/types.ts';
import { newId } from '../../../platform/ids.ts';
import { DEFAULT_GREETING } from '../voicemail/voicemail.service.ts';
import { parseSipUri } from '../../../providers/voice/sip/message.ts';
import type { CallPlacing } from '../placing/placing.service.ts';
import type { CallTransfers } from '../calls/transfers.ts';
import type { VoiceNumbersPort } from '../voice.ports.ts';
import { CALL_MAX_DURATION } from '../voice.schemas.ts';

type TrunkRow = { organization_id: string; plan: Plan; encryption: 'tls_srtp' | 'tls' | 'none'; codecs: string[]; origination_uris: string[] };

export class InboundCalls {
  readonly #pool: Pool;
  readonly #placing: CallPlacing;
  readonly #numbers: VoiceNumbersPort;
  readonly #transfers: CallTransfers;
  readonly #log: (message: string, detail: Record<string, unknown>) => void;

  constructor(deps: { pool: Pool; placing: CallPlacing; transfers: CallTransfers; numbers: VoiceNumbersPort; log: (message: string, detail: Record<string, unknown>) => void }) {
    this.#pool = deps.pool;
    this.#transfers = deps.transfers;
    this.#placing = deps.placing;
    this.#numbers = deps.numbers;
    this.#log = deps.log;
  }

  async route(offer: InboundOffer): Promise<InboundDecision> {
    const trunks = await this.#trunksFrom(offer.sourceHost);
    if (!trunks.length) return { refuse: 403, reason: 'Forbidden' };
    const to = offer.to.startsWith('+') ? offer.to : `+${offer.to}`;
    for (const trunk of trunks) {
      const number = await this.#numbers.inboundNumber?.({ organizationId: trunk.organization_id, mode: 'live' }, to);
      if (!number) continue;
      const route = number.voiceRoute;
      const ivrId = route?.type === 'ivr' ? route.ivr_id : null;
      // A number without a route that is the dial-in number of a conference under way: the caller enters its PIN.
      const dialIn = !route && (await this.#dialIn(trunk.organization_id, to));
      const agentId = route || dialIn ? null : number.agentId;
      const box = route?.type === 'voicemail' ? await this.#box(trunk.organization_id, route.voicemail_id) : null;
      const forward = route?.type === 'forward' ? route.to : null;
      if (!ivrId && !agentId && !box && !forward && !dialIn) {
        this.#log('voice: an inbound call to a number without a route it can take is refused 480', { number: to, route: route?.type ?? null });
        return { refuse: 480, reason: 'Temporarily Unavailable' };
      }
      const scope = systemScope(trunk.organization_id, 'live', trunk.plan, `sip-inbound-${Date.now()}`);
      try {
        let voicemail: MessageOrder | undefined;
        const call = await this.#placing.inbound(scope, {
          from: offer.from.startsWith('+') || !/^\d+$/.test(offer.from) ? offer.from : `+${offer.from}`, to, agentId, ivrId, conferenceId: null, webhookUrl: null,
          record: false, maxDuration: CALL_MAX_DURATION.default, metadata: {},
        }, dialIn ? (row, step) => {
          row.ivrState = { path: [], prompt: 0, retries: 0, done: true, voicemail: null, pin: { entered: '', attempts: 0 } };
          step('conference_dial_in', { number: to });
        } : forward ? (_row, step) => step('transfer', { number: forward }) : box ? (row, step) => {
          // The message's id, chosen now: the gateway records under it, and the message takes it.
          const messageId = newId('vmsg', row.createdAt.getTime());
          voicemail = { greeting: box.greeting ?? DEFAULT_GREETING, language: 'en-US', recording: messageId, maxSeconds: box.max_duration };
          row.ivrState = { path: [], prompt: 0, retries: 0, done: true, voicemail: { boxId: box.id, since: row.createdAt.toISOString(), messageId } };
          step('voicemail_recording', { voicemail_id: box.id, max_duration: box.max_duration, greeting: box.greeting });
        } : undefined);
        const transfer = forward ? () => this.#transfers.legIn(scope, call, forward) : undefined;
        return { callId: call.id, record: false, encryption: trunk.encryption, codecs: trunk.codecs, ...(voicemail ? { voicemail } : {}), ...(transfer ? { transfer } : {}) };
      } catch (e) {
        // No minutes left to reserve, or the row could not be written: the caller hears a refusal, not silence.
        this.#log(`voice: an inbound call could not be taken: ${(e as Error).message}`, { number: to });
        return { refuse: 503, reason: 'Service Unavailable' };
      }
    }
    return { refuse: 404, reason: 'Not Found' };
  }

  /** Whether `number` is the dial-in number of one of the organization's live conferences not ended. */
  async #dialIn(organizationId: string, number: string): Promise<boolean> {
    const { rows } = await this.#pool.query(
      `select 1 from conferences where organization_id = $1 and mode = 'live' and dial_in_number = $2 and status <> 'ended' limit 1`, [organizationId, number],
    );
    return rows.length > 0;
  }

  /** The organization's live voicemail box a route names (null: gone, the call is refused). */
  async #box(organizationId: string, id: string): Promise<{ id: string; greeting: string | null; max_duration: number } | null> {
    const { rows } = await this.#pool.query<{ id: string; greeting: string | null; max_duration: number }>(
      `select id, greeting, max_duration from voicemail_boxes where organization_id = $1 and mode = 'live' and id = $2`, [organizationId, id],
    );
    return rows[0] ?? null;
  }

  /** Live trunks whose origination_uris name this source (a host as written, or one resolving to it). */
  async #trunksFrom(source: string): Promise<TrunkRow[]> {
    const { rows } = await this.#pool.query<TrunkRow>(
      `select t.organization_id, o.plan, t.encryption, t.codecs, t.origination_uris from sip_trunks t join organizations o on o.id = t.organization_id
        where t.mode = 'live' and t.status = 'active' and jsonb_array_length(t.origination_uris) > 0 order by t.id`,
    );
    const matches: TrunkRow[] = [];
    for (const row of rows) {
      for (const uri of row.origination_uris) {
        const host = parseSipUri(uri)?.host ?? uri;
        if (host === source || (!isIP(host) && (await resolves(host, source)))) {
          matches.push(row);
          break;
        }
      }
    }
    return matches;
  }
}

async function resolves(host: string, address: string): Promise<boolean> {
  try {
    return (await lookup(host, { all: true })).some((a) => a.address === address);
  } catch {
    return false;
  }
}
