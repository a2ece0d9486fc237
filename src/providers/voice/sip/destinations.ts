/**
 * Where the gateway may send SIP: the outbound address policy of webhooks (platform/http:
 * `vetHost`, `resolveAndVet`, the WEBHOOKS_ALLOW_LOOPBACK switch) applied to SIP hosts. A trunk's
 * URI is checked when it is saved (no DNS), and every destination again when the gateway sends to
 * it: the name resolved then, every address it has vetted, and the first one used (no second
 * lookup between the check and the packet).
 */
import { resolveAndVet, SafeHttpError, vetHost, type HostLookup, type UrlPolicy, type VettedAddress } from '../../../platform/http/safeHttp.ts';
import { parseSipUri } from './message.ts';

/** A destination the address policy refuses (loopback, private, link-local, metadata, reserved…): nothing was sent. */
export class SipDestinationBlocked extends Error {
  readonly host: string;
  constructor(host: string, reason: string) {
    super(`SIP destination ${host} is not allowed: ${reason}`);
    this.name = 'SipDestinationBlocked';
    this.host = host;
  }
}

export type SipUriProblem = { reason: string; blocked: boolean; loopback: boolean };

/**
 * The static check of a SIP URI the gateway will send to (a trunk's termination URI): a SIP URI
 * whose port, if any, is 1–65535 and whose host passes the policy (no DNS here; a name is checked
 * again, resolved, at connect time). Undefined when it may be saved.
 */
export function sipUriProblem(uri: string, policy: UrlPolicy): SipUriProblem | undefined {
  const parsed = parseSipUri(uri);
  if (!parsed) return { reason: 'not a SIP URI', blocked: false, loopback: false };
  if (parsed.port !== undefined && (parsed.port < 1 || parsed.port > 65_535)) return { reason: 'the port must be 1-65535', blocked: false, loopback: false };
  const verdict = vetHost(parsed.host, policy);
  if (verdict.ok) return undefined;
  return { reason: verdict.reason, blocked: verdict.kind === 'blocked_address', loopback: verdict.loopback };
}

/**
 * The address to send to `host` at: refused (SipDestinationBlocked) when the host fails the static
 * check or any address it resolves to is blocked; a name that does not resolve fails as a plain error.
 */
export async function vetDestination(host: string, policy: UrlPolicy, lookup?: HostLookup): Promise<VettedAddress> {
  const verdict = vetHost(host, policy);
  if (!verdict.ok) throw new SipDestinationBlocked(host, verdict.reason);
  try {
    // The canonical spelling: `127.1` is 127.0.0.1, not a name to look up.
    return await resolveAndVet(verdict.host, policy, lookup);
  } catch (e) {
    if (e instanceof SafeHttpError && e.kind === 'blocked_address') throw new SipDestinationBlocked(host, 'it resolves to a private, loopback or reserved address');
    throw e;
  }
}
