/**
 * Voice PHI in HIPAA mode (see platform/phi.ts): a call's custom metadata keys marked as PHI are
 * sealed in `calls.phi`, a voicemail message's transcription in `voicemail_messages.phi`, each
 * bound to organization, table, row id and column. Recordings are media the gateway holds: no
 * bytes and no media reference are stored here (a call keeps its recorded seconds; the
 * `recording_url` is signed at read time), so nothing of them is sealed; reading the media obeys
 * the PHI access rules instead (audio cannot be redacted: without access, 403) and is logged.
 * Clear: addresses, statuses, durations, IVR steps (menu keys pressed, the flow's own prompts).
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { ServiceError } from '../../platform/errors.ts';
import { PhiUse, PHI_REASON_HEADER, REDACTED, redactMetadata, splitMetadata, type PhiCodec, type PhiPort, type PhiRef } from '../../platform/phi.ts';
import type { Call, VoicemailMessage } from './voice.entities.ts';

export const CALL_PHI_FIELDS = ['metadata'] as const;
export const VOICEMAIL_PHI_FIELDS = ['transcription'] as const;

const callRef = (id: string): PhiRef => ({ table: 'calls', rowId: id, column: 'phi' });
const voicemailRef = (id: string): PhiRef => ({ table: 'voicemail_messages', rowId: id, column: 'phi' });

/** The stored metadata of a call in HIPAA mode: the clear keys, and the PHI keys sealed (null when there are none). */
export function sealCallMetadata(id: string, metadata: Record<string, unknown>, codec: PhiCodec): { metadata: Record<string, unknown>; phi: string | null } {
  const { clear, phi } = splitMetadata(metadata, (k) => codec.isPhiKey(k));
  return { metadata: clear, phi: Object.keys(phi).length > 0 ? codec.seal(callRef(id), JSON.stringify(phi)) : null };
}

/** A call with its PHI metadata opened (a plain copy, never a managed entity). */
export function openCall<T extends Call>(c: T, codec: PhiCodec): T {
  if (!c.phi) return c;
  return { ...c, metadata: { ...c.metadata, ...(JSON.parse(codec.open(callRef(c.id), c.phi)) as Record<string, unknown>) }, phi: null };
}

export function redactCall<T extends Call>(c: T, isPhiKey: (key: string) => boolean, codec?: PhiCodec): T {
  const opened = c.phi && codec ? openCall(c, codec) : c;
  return { ...opened, metadata: redactMetadata(opened.metadata, isPhiKey), phi: null };
}

export function sealTranscription(id: string, transcription: string | null, codec: PhiCodec): { transcription: null; phi: string | null } {
  return { transcription: null, phi: transcription === null ? null : codec.seal(voicemailRef(id), transcription) };
}

export function openVoicemail<T extends VoicemailMessage>(m: T, codec: PhiCodec): T {
  if (!m.phi) return m;
  return { ...m, transcription: codec.open(voicemailRef(m.id), m.phi), phi: null };
}

export function redactVoicemail<T extends VoicemailMessage>(m: T): T {
  return { ...m, transcription: m.transcription === null && !m.phi ? null : REDACTED, phi: null };
}

/** The voice context's use of the `phi` port (optional: without the HIPAA module nothing is sealed). */
export class VoicePhi extends PhiUse {
  constructor(port: () => PhiPort | undefined) {
    super(port, 'a voice row');
  }



  /** Calls as this caller may see them (PHI metadata opened and the read logged, or redacted). */
  calls<T extends Call>(scope: Scope, rows: T[], operation: string): Promise<T[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openCall(r, codec), redact: (r, codec, isPhiKey) => redactCall(r, isPhiKey, codec),
      resourceType: 'call', fields: CALL_PHI_FIELDS, operation,
    });
  }

  /** Voicemail messages as this caller may see them (transcription opened and the read logged, or redacted). */
  voicemails<T extends VoicemailMessage>(scope: Scope, rows: T[], operation: string): Promise<T[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openVoicemail(r, codec), redact: (r) => redactVoicemail(r),
      resourceType: 'voicemail_message', fields: VOICEMAIL_PHI_FIELDS, operation,
    });
  }

  /** A recording is about to be served: in HIPAA mode only to callers with PHI access (403 otherwise), logged. */
  async recording(scope: Scope, id: string, operation: string): Promise<void> {
    const port = this.port();
    if (!port) return;
    const access = await port.access(scope);
    if (!access.hipaa) return;
    if (!access.granted) {
      throw new ServiceError('FORBIDDEN', `In HIPAA mode recordings are PHI: this role cannot hear them${scope.role === 'developer' ? ` without a reason code (${PHI_REASON_HEADER})` : ''}`, {
        reason: 'phi_access_required', header: PHI_REASON_HEADER, id,
      });
    }
    await access.record({ resourceType: id.startsWith('vmsg_') ? 'voicemail_recording' : 'call_recording', resourceIds: [id], fields: ['recording'], operation });
  }
}
