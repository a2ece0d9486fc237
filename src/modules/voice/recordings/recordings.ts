/**
 * Recording links: `recording_url` is a URL of this service, signed for one organization, mode
 * and recording (a call's or a voicemail message's id) and valid until `expires`; the caller must
 * still authenticate (recordings are PHI-bearing media).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { ServiceError } from '../../../platform/errors.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import type { VoicePhi } from '../voice.phi.ts';

export class RecordingLinks {
  readonly #secret: string;
  readonly #baseUrl: string;
  readonly #ttlSeconds: number;

  constructor(deps: { appSecret: string; baseUrl: string; ttlSeconds: number }) {
    this.#secret = deps.appSecret;
    this.#baseUrl = deps.baseUrl;
    this.#ttlSeconds = deps.ttlSeconds;
  }

  #sign(tenant: TenantRef, id: string, expires: number): string {
    return createHmac('sha256', this.#secret).update(`voice-recording:${tenant.organizationId}:${tenant.mode}:${id}:${expires}`).digest('base64url').slice(0, 32);
  }

  url(tenant: TenantRef, id: string, now: Date): string {
    // Links made in the same minute are the same link (stable for caches and comparisons).
    const expires = Math.floor(now.getTime() / 60_000) * 60 + this.#ttlSeconds;
    return `${this.#baseUrl}/v1/voice/recordings/${encodeURIComponent(id)}?expires=${expires}&signature=${this.#sign(tenant, id, expires)}`;
  }

  /** NOT_FOUND when the signature is not ours for this tenant and id (nothing is revealed); FORBIDDEN when our link has expired. */
  verify(tenant: TenantRef, id: string, expires: number, signature: string, now: Date): void {
    const expected = Buffer.from(this.#sign(tenant, id, expires));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new ServiceError('NOT_FOUND', 'No recording answers this link for this account', { id });
    }
    if (expires * 1000 < now.getTime()) throw new ServiceError('FORBIDDEN', 'The recording link has expired; read the call again for a fresh recording_url', { field: 'expires', expired_at: new Date(expires * 1000).toISOString() });
  }
}

/**
 * Serves a recording (a call's or a voicemail message's) to a caller holding a valid link; in
 * HIPAA mode only to callers with PHI access, each serving in the PHI access log. A recording
 * purged by HIPAA retention is gone (NOT_FOUND).
 */
export class RecordingReader {
  readonly #links: RecordingLinks;
  readonly #find: (tenant: TenantRef, id: string) => Promise<{ seconds: number } | null>;
  readonly #now: () => Date;
  readonly #render: (seconds: number) => string;
  readonly #phi: VoicePhi;
  readonly #stored: ((id: string) => Promise<{ audio: Buffer; seconds: number } | undefined>) | undefined;

  /** `stored`: the audio a live call recorded (its WAV file), served instead of the sandbox's tone when there is one. */
  constructor(deps: {
    links: RecordingLinks; find: (tenant: TenantRef, id: string) => Promise<{ seconds: number } | null>; now: () => Date; render: (seconds: number) => string; phi: VoicePhi;
    stored?: (id: string) => Promise<{ audio: Buffer; seconds: number } | undefined>;
  }) {
    this.#phi = deps.phi;
    this.#stored = deps.stored;
    this.#links = deps.links;
    this.#find = deps.find;
    this.#now = deps.now;
    this.#render = deps.render;
  }

  async read(scope: Scope, id: string, expires: number, signature: string): Promise<{ seconds: number; audio: string | Buffer }> {
    this.#links.verify(scope, id, expires, signature, this.#now());
    const found = await this.#find(scope, id);
    if (!found) throw new ServiceError('NOT_FOUND', `Recording ${id} not found`, { id });
    await this.#phi.recording(scope, id, 'voice.getRecording');
    const stored = scope.mode === 'live' ? await this.#stored?.(id) : undefined;
    if (stored) return { seconds: Math.round(stored.seconds * 100) / 100, audio: stored.audio };
    // A live call's recording is its audio or nothing (its media failed, or another instance holds the file).
    if (scope.mode === 'live' && this.#stored && !id.startsWith('vmsg_')) throw new ServiceError('NOT_FOUND', `Recording ${id} is not available on this service`, { id });
    return { seconds: found.seconds, audio: this.#render(found.seconds) };
  }
}
