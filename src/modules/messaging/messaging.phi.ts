/**
 * A message's PHI in HIPAA mode: body, channel content (media URLs, email subject/html/text, RCS
 * cards, …), template variables and the custom metadata keys marked as PHI are stored sealed
 * together in the `phi` column (bound to organization, table, row id and column); the clear
 * columns keep only what routing and filters need (channel, addresses, status, content `type`,
 * the unmarked metadata keys). Reads open or redact them (see platform/phi.ts).
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { PhiUse, REDACTED, redactDeep, redactMetadata, splitMetadata, type PhiCodec, type PhiPort, type PhiRef } from '../../platform/phi.ts';
import type { Message } from './messaging.entities.ts';

type Sealed = { body: string | null; content: Record<string, unknown>; variables: Record<string, unknown> | null; metadata: Record<string, unknown> };

export const MESSAGE_PHI_FIELDS = ['body', 'content', 'variables', 'metadata'] as const;
const ref = (id: string): PhiRef => ({ table: 'messages', rowId: id, column: 'phi' });

/** What of `content` stays clear: its kind (text, media, template, card, …). */
function clearContent(content: Record<string, unknown>): Record<string, unknown> {
  return typeof content.type === 'string' ? { type: content.type } : {};
}

/** The row to store for `m` in HIPAA mode (`m` itself is not changed). */
export function sealMessage(m: Message, codec: PhiCodec): Message {
  const { clear, phi } = splitMetadata(m.metadata, (k) => codec.isPhiKey(k));
  const sealed: Sealed = { body: m.body ?? null, content: m.content, variables: m.variables ?? null, metadata: phi };
  return { ...m, body: null, content: clearContent(m.content), variables: null, metadata: clear, phi: codec.seal(ref(m.id), JSON.stringify(sealed)) };
}

/** A stored message with its sealed PHI opened (a copy). */
export function openMessage(m: Message, codec: PhiCodec): Message {
  if (!m.phi) return m;
  const s = JSON.parse(codec.open(ref(m.id), m.phi)) as Sealed;
  return { ...m, body: s.body, content: { ...s.content, ...clearContent(m.content) }, variables: s.variables, metadata: { ...m.metadata, ...s.metadata }, phi: null };
}

/**
 * What a caller without PHI access sees: body and content strings redacted (content `type` kept),
 * variables dropped, PHI metadata keys redacted. Sealed rows show their PHI metadata keys redacted too.
 */
export function redactMessage(m: Message, isPhiKey: (key: string) => boolean, codec?: PhiCodec): Message {
  const sealed = m.phi && codec ? openMessage(m, codec) : m;
  const content = redactDeep(sealed.content);
  if (typeof sealed.content.type === 'string') content.type = sealed.content.type;
  return {
    ...sealed, body: sealed.body === null ? null : REDACTED, content, variables: null,
    metadata: redactMetadata(sealed.metadata, isPhiKey), phi: null,
  };
}

/** The messaging context's side of the `phi` port (optional: without the HIPAA module nothing is sealed). */
export class MessagePhi extends PhiUse {
  constructor(port: () => PhiPort | undefined) {
    super(port, 'a message');
  }

  /**
   * Messages as this caller may see them: sealed PHI opened and the disclosure logged (HIPAA mode),
   * or redacted for callers without PHI access (viewer, billing, a developer without a reason code).
   */
  reveal(scope: Scope, rows: Message[], operation: string): Promise<Message[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openMessage(r, codec), redact: (r, codec, isPhiKey) => redactMessage(r, isPhiKey, codec),
      resourceType: 'message', fields: MESSAGE_PHI_FIELDS, operation,
    });
  }

  /** A codec opening `sealed` (a message's `phi`). */
  async codec(organizationId: string, sealed: string[]): Promise<PhiCodec> {
    return (await this.opener(organizationId, sealed))!;
  }
}
