/**
 * Where a tenant's calls and their callbacks may go: the gateway of its mode (the sandbox in test
 * mode, SIP in live mode), the SIP trunk live calls go out on, and the outbound address policy a
 * `webhook_url` must pass. Placing, conferences, voicemail boxes and the gateway side ask here.
 */
import { ServiceError } from '../../../platform/errors.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../../platform/http/safeHttp.ts';
import type { TrunkOrder, VoiceGateway, VoiceGateways } from '../../../providers/voice/types.ts';

export class CallRoutes {
  readonly #gateways: VoiceGateways;
  readonly #trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  readonly #policy: UrlPolicy;

  /** `trunk`: the organization's SIP trunk for live calls (none: live calls are CHANNEL_UNAVAILABLE). */
  constructor(deps: { gateways: VoiceGateways; trunk: (scope: TenantRef) => Promise<TrunkOrder | null>; policy: UrlPolicy }) {
    this.#gateways = deps.gateways;
    this.#trunk = deps.trunk;
    this.#policy = deps.policy;
  }

  gateway(scope: TenantRef): VoiceGateway {
    const gateway = this.#gateways.forMode(scope.mode);
    if (!gateway) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', `Voice is not available in ${scope.mode} mode: no SIP trunk gateway is configured; use a test-mode key for the sandbox gateway`, { channel: 'voice', mode: scope.mode });
    }
    return gateway;
  }

  /** The organization's trunk for live calls, or null (read each time: a trunk may be added or removed). */
  trunk(scope: TenantRef): Promise<TrunkOrder | null> {
    return this.#trunk(scope);
  }

  /**
   * The gateway, and for live calls the trunk they go out on: CHANNEL_UNAVAILABLE (503) without
   * one (test mode needs none: the sandbox carries its calls).
   */
  async route(scope: TenantRef): Promise<TrunkOrder | null> {
    this.gateway(scope);
    if (scope.mode === 'test') return null;
    const trunk = await this.#trunk(scope);
    if (!trunk) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', 'Live calls go out on a SIP trunk and this account has none: add one with POST /v1/voice/sip-trunks (or use a test-mode key for the sandbox)', { channel: 'voice', mode: scope.mode, reason: 'no_sip_trunk' });
    }
    return trunk;
  }

  /** A `webhook_url` (field `field`) as stored, or INVALID_WEBHOOK_URL when the outbound address policy refuses it. */
  checkUrl(value: string | null | undefined, field: string): string | null {
    if (value === undefined || value === null) return null;
    const checked = checkWebhookUrl(value, this.#policy);
    if (!checked.ok) throw new ServiceError('INVALID_WEBHOOK_URL', `${field} is not allowed: ${checked.reason}`, { field, value });
    return checked.url.toString();
  }
}
