/**
 * A contact's PHI in HIPAA mode: the custom metadata keys marked as PHI (`phi_metadata_fields`,
 * every key by default) are stored sealed together in the `phi` column (bound to organization,
 * table `contacts`, row id and column `phi`); `metadata` keeps the unmarked keys, which search and
 * segments read. The uploaded CSV of an import waiting for its job is sealed the same way
 * (`contact_imports.csv`). Reads open the keys for callers with PHI access (each disclosure in the
 * PHI access log, resource type `contact`) and redact them for the others (see platform/phi.ts).
 */
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { redactMetadata, splitMetadata, type PhiCodec, type PhiPort, type PhiRef } from '../../platform/phi.ts';
import type { Contact } from './contacts.entities.ts';

export const CONTACT_PHI_FIELDS = ['metadata'] as const;
/** The prefix of every sealed value (`phi1:<version>:…`): a CSV that starts with it is sealed. */
const SEALED = /^phi\d+:/;

const contactRef = (id: string): PhiRef => ({ table: 'contacts', rowId: id, column: 'phi' });
const csvRef = (id: string): PhiRef => ({ table: 'contact_imports', rowId: id, column: 'csv' });

/** The PHI metadata of a stored contact (empty when nothing is sealed). */
function sealedMetadata(c: Pick<Contact, 'id' | 'phi'>, codec: PhiCodec): Record<string, unknown> {
  return c.phi ? (JSON.parse(codec.open(contactRef(c.id), c.phi)) as Record<string, unknown>) : {};
}

/** The columns to store for a contact's whole metadata: with a codec, PHI keys sealed; without, all in clear. */
export function storedMetadata(id: string, metadata: Record<string, unknown>, codec: PhiCodec | null): { metadata: Record<string, unknown>; phi: string | null } {
  if (!codec) return { metadata, phi: null };
  const { clear, phi } = splitMetadata(metadata, (k) => codec.isPhiKey(k));
  return { metadata: clear, phi: Object.keys(phi).length ? codec.seal(contactRef(id), JSON.stringify(phi)) : null };
}

/** A stored contact with its sealed metadata opened (a copy). */
export function openContact(c: Contact, codec: PhiCodec): Contact {
  if (!c.phi) return { ...c };
  return { ...c, metadata: { ...c.metadata, ...sealedMetadata(c, codec) }, phi: null };
}

/**
 * The contacts' PHI through the optional `phi` port: a no-op without it. Writers ask `writer` for
 * a codec (null outside HIPAA mode) and `whole` for a stored contact's whole metadata; readers
 * pass what they present through `reveal`.
 */
export class ContactPhi {
  readonly #port: () => PhiPort | undefined;

  constructor(port: () => PhiPort | undefined) {
    this.#port = port;
  }

  get port(): PhiPort | undefined {
    return this.#port();
  }

  /** The organization's codec while it is in HIPAA mode, else null. */
  async writer(organizationId: string): Promise<PhiCodec | null> {
    return (await this.#port()?.writer(organizationId)) ?? null;
  }

  /** A codec able to open these contacts' sealed metadata (undefined when none is sealed). */
  async opener(organizationId: string, rows: readonly Pick<Contact, 'phi'>[]): Promise<PhiCodec | undefined> {
    const sealed = rows.map((r) => r.phi).filter((x): x is string => !!x);
    if (sealed.length === 0) return undefined;
    const port = this.#port();
    if (!port) throw new Error('a contact holds sealed PHI but no module provides the phi port');
    return port.codec(organizationId, sealed);
  }

  /** The whole metadata of a stored contact (clear keys and opened PHI keys). */
  async whole(organizationId: string, c: Pick<Contact, 'id' | 'phi' | 'metadata'>): Promise<Record<string, unknown>> {
    if (!c.phi) return c.metadata;
    const codec = await this.opener(organizationId, [c]);
    return { ...c.metadata, ...sealedMetadata(c, codec!) };
  }

  /** Sets `c.metadata` / `c.phi` to store `metadata` (sealed in HIPAA mode). */
  async store(tenant: TenantRef, c: Contact, metadata: Record<string, unknown>, codec?: PhiCodec | null): Promise<void> {
    const stored = storedMetadata(c.id, metadata, codec === undefined ? await this.writer(tenant.organizationId) : codec);
    c.metadata = stored.metadata;
    c.phi = stored.phi;
  }

  /**
   * Contacts as this caller may see them (copies): sealed metadata opened and the disclosure logged
   * in HIPAA mode, or the PHI keys redacted for callers without PHI access (viewer, billing, a
   * developer without a reason code).
   */
  async reveal(scope: Scope, rows: readonly Contact[], operation: string): Promise<Contact[]> {
    const port = this.#port();
    if (!port || rows.length === 0) return [...rows];
    const access = await port.access(scope);
    const codec = await this.opener(scope.organizationId, rows);
    if (!access.hipaa && !codec) return [...rows];
    const opened = rows.map((r) => (codec ? openContact(r, codec) : { ...r }));
    if (!access.granted) return opened.map((c) => ({ ...c, metadata: redactMetadata(c.metadata, access.isPhiKey) }));
    await access.record({ resourceType: 'contact', resourceIds: rows.map((r) => r.id), fields: CONTACT_PHI_FIELDS, operation });
    return opened;
  }

  async revealOne(scope: Scope, c: Contact, operation: string): Promise<Contact> {
    return (await this.reveal(scope, [c], operation))[0]!;
  }

  /** Is this metadata key PHI for the organization now (only in HIPAA mode)? */
  async phiKeyTest(organizationId: string): Promise<((key: string) => boolean) | null> {
    const codec = await this.writer(organizationId);
    return codec ? (key) => codec.isPhiKey(key) : null;
  }

  /** An import's CSV as stored: sealed in HIPAA mode. */
  async storeCsv(organizationId: string, importId: string, csv: string): Promise<string> {
    const codec = await this.writer(organizationId);
    return codec ? codec.seal(csvRef(importId), csv) : csv;
  }

  /** An import's CSV as uploaded. */
  async openCsv(organizationId: string, importId: string, stored: string): Promise<string> {
    if (!SEALED.test(stored)) return stored;
    const port = this.#port();
    if (!port) throw new Error('a contact import holds a sealed CSV but no module provides the phi port');
    return (await port.codec(organizationId, [stored])).open(csvRef(importId), stored);
  }

  /** A clear CSV sealed (the backfill), or null when it is empty or sealed already. */
  static sealCsv(codec: PhiCodec, importId: string, stored: string): string | null {
    return stored === '' || SEALED.test(stored) ? null : codec.seal(csvRef(importId), stored);
  }
}
