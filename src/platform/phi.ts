/**
 * Protected health information (PHI): the contract between the contexts that store it
 * (messaging, contacts, agents, voice) and the HIPAA context that owns the keys, the access rules
 * and the access log. The HIPAA module provides the `phi` port; without it nothing is sealed.
 *
 * - Writes: `writer(org)` answers a codec while the organization is in HIPAA mode (else null);
 *   the storing context seals its PHI fields with it, binding organization, table, row id and
 *   column as additional authenticated data, so a ciphertext moved elsewhere fails to open.
 * - Reads: `access(scope)` says whether this caller sees PHI (owner, admin; developer with a reason
 *   code; never viewer or billing) and records each disclosure in the PHI access log;
 *   `codec(org, sealed)` opens what was sealed, whatever the organization's mode is now.
 * - Retention and backfill: the storing contexts purge and seal their own rows in batches, asking
 *   the port which organizations and cut-offs apply.
 */
import { PHI_REASONS, type PhiReason, type Scope } from './auth/scope.ts';
import { badRequest } from './errors.ts';
/** The header a developer names a reason code with (GraphQL: the same header, or `extensions.phiReason`). */
export const PHI_REASON_HEADER = 'X-PHI-Reason';
/** What a redacted PHI string reads as. */
export const REDACTED = '[REDACTED]';

/** Where a sealed value lives (bound into its authenticated data). */
export type PhiRef = { table: string; rowId: string; column: string };

export interface PhiCodec {
  seal(ref: PhiRef, plain: string): string;
  open(ref: PhiRef, sealed: string): string;
  /** Is this custom metadata key PHI for the organization (sealed in HIPAA mode, redacted for those without access)? */
  isPhiKey(key: string): boolean;
}

export type PhiAccess = {
  /** The organization is in HIPAA mode now. */
  hipaa: boolean;
  /** This caller sees PHI (always, outside HIPAA mode). */
  granted: boolean;
  isPhiKey(key: string): boolean;
  /** Writes a PHI access log entry (no-op outside HIPAA mode and for the platform's own jobs). */
  record(entry: { resourceType: string; resourceIds: readonly string[]; fields: readonly string[]; operation: string }): Promise<void>;
};

export type PhiPort = {
  /** A codec when the organization is in HIPAA mode (cached for `HIPAA_MODE_CACHE_MS`), else null. */
  writer(organizationId: string): Promise<PhiCodec | null>;
  /** A codec able to open the given sealed values (their key versions loaded) and seal new ones. */
  codec(organizationId: string, sealed?: readonly (string | null | undefined)[]): Promise<PhiCodec>;
  access(scope: Scope): Promise<PhiAccess>;
  /** Organizations in HIPAA mode with the time before which content is purged. */
  retention(): Promise<{ organizationId: string; cutoff: Date }[]>;
  /** Organizations in HIPAA mode whose rows of `table` stored before the mode was on are not sealed yet. */
  backfillPending(table: string): Promise<{ organizationId: string; until: Date }[]>;
  backfillDone(organizationId: string, table: string, until: Date): Promise<void>;
};

/** Every string inside `value` replaced by {@link REDACTED} (structure, numbers and booleans kept). */
export function redactDeep<T>(value: T): T {
  if (typeof value === 'string') return REDACTED as T;
  if (Array.isArray(value)) return value.map((v: unknown) => redactDeep(v)) as T;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v)])) as T;
  }
  return value;
}

/** Splits custom metadata into its clear keys and its PHI keys. */
export function splitMetadata(metadata: Record<string, unknown> | null | undefined, isPhiKey: (key: string) => boolean): { clear: Record<string, unknown>; phi: Record<string, unknown> } {
  const clear: Record<string, unknown> = {};
  const phi: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(metadata ?? {})) (isPhiKey(k) ? phi : clear)[k] = v;
  return { clear, phi };
}

/** Metadata with its PHI keys redacted. */
export function redactMetadata(metadata: Record<string, unknown> | null | undefined, isPhiKey: (key: string) => boolean): Record<string, unknown> {
  return Object.fromEntries(Object.entries(metadata ?? {}).map(([k, v]) => [k, isPhiKey(k) ? redactDeep(v) : v]));
}

/** A reason code from the header or a GraphQL extension; absent → undefined; anything else → 400 VALIDATION_ERROR. */
export function parsePhiReason(value: unknown, field: string): PhiReason | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'string' && (PHI_REASONS as readonly string[]).includes(value.trim().toLowerCase())) return value.trim().toLowerCase() as PhiReason;
  throw badRequest(`${field} must be one of ${PHI_REASONS.join(', ')}`, { field, expected: PHI_REASONS });
}

/**
 * A context's use of the optional `phi` port (messaging, agents, voice extend it with how they
 * reveal their own rows): the codec to seal with while the organization is in HIPAA mode, and one
 * that opens values sealed earlier.
 */
export class PhiUse {
  readonly #port: () => PhiPort | undefined;
  readonly #holder: string;

  /** `holder` names what holds sealed values, for the error when the port is missing (`a message`). */
  constructor(port: () => PhiPort | undefined, holder: string) {
    this.#port = port;
    this.#holder = holder;
  }

  protected port(): PhiPort | undefined {
    return this.#port();
  }

  /** The organization's codec while it is in HIPAA mode (cached lookup), else null. */
  async writer(organizationId: string): Promise<PhiCodec | null> {
    return (await this.#port()?.writer(organizationId)) ?? null;
  }

  /**
   * Rows as this caller may see them: outside HIPAA mode (and nothing sealed) as they are; without
   * PHI access redacted (`redact`, with a codec when something is sealed, so the shape can show);
   * with access opened and the disclosure recorded in the PHI access log.
   */
  protected async revealRows<T extends { id: string }>(scope: Scope, rows: T[], how: {
    sealed(row: T): readonly (string | null | undefined)[];
    open(row: T, codec: PhiCodec): T;
    redact(row: T, codec: PhiCodec | undefined, isPhiKey: (key: string) => boolean): T;
    resourceType: string;
    fields: readonly string[];
    operation: string;
  }): Promise<T[]> {
    const port = this.#port();
    if (!port || rows.length === 0) return rows;
    const access = await port.access(scope);
    const codec = await this.opener(scope.organizationId, rows.flatMap((r) => how.sealed(r)));
    if (!access.hipaa && !codec) return rows;
    if (!access.granted) return rows.map((r) => how.redact(r, codec, access.isPhiKey));
    await access.record({ resourceType: how.resourceType, resourceIds: rows.map((r) => r.id), fields: how.fields, operation: how.operation });
    return codec ? rows.map((r) => how.open(r, codec)) : rows;
  }

  /** A codec opening the given sealed values (undefined when none is sealed). */
  async opener(organizationId: string, sealed: readonly (string | null | undefined)[]): Promise<PhiCodec | undefined> {
    const values = sealed.filter((x): x is string => !!x);
    if (values.length === 0) return undefined;
    const port = this.#port();
    if (!port) throw new Error(`${this.#holder} holds sealed PHI but no module provides the phi port`);
    return port.codec(organizationId, values);
  }
}
