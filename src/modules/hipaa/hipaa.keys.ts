/**
 * The organizations' data keys and the PHI cipher. Each organization has one or more data keys
 * (versions); the newest seals, every version opens. Data keys are stored wrapped by the key
 * management adapter and kept unwrapped in this process's memory once used.
 *
 * Sealed format: `phi1:<version>:<base64(nonce ‖ tag ‖ ciphertext)>`, AES-256-GCM with a random
 * 96-bit nonce and a 128-bit tag; the authenticated data is `organization ␟ table ␟ row id ␟ column`.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import type { PhiCodec, PhiRef } from '../../platform/phi.ts';
import type { KeyManagement } from '../../providers/kms/types.ts';

const PREFIX = 'phi1:';

/** The key version a sealed value names (undefined when it is not one). */
export function sealedVersion(sealed: string): number | undefined {
  if (!sealed.startsWith(PREFIX)) return undefined;
  const v = Number(sealed.slice(PREFIX.length, sealed.indexOf(':', PREFIX.length)));
  return Number.isInteger(v) && v > 0 ? v : undefined;
}

function aad(organizationId: string, ref: PhiRef): Buffer {
  return Buffer.from([organizationId, ref.table, ref.rowId, ref.column].join('\u001f'));
}

/** One organization's keys: seals with the newest version, opens with any loaded one. */
export class OrgKeys {
  readonly organizationId: string;
  readonly keys: ReadonlyMap<number, Buffer>;
  readonly current: number;

  constructor(organizationId: string, keys: ReadonlyMap<number, Buffer>, current: number) {
    this.organizationId = organizationId;
    this.keys = keys;
    this.current = current;
  }

  seal(ref: PhiRef, plain: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.current)!, nonce);
    cipher.setAAD(aad(this.organizationId, ref));
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${this.current}:${Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(ref: PhiRef, sealed: string): string {
    const version = sealedVersion(sealed);
    const key = version === undefined ? undefined : this.keys.get(version);
    if (!key) throw new Error(`PHI value of ${ref.table}.${ref.column} ${ref.rowId}: unknown format or key version`);
    const raw = Buffer.from(sealed.slice(sealed.indexOf(':', PREFIX.length) + 1), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    decipher.setAAD(aad(this.organizationId, ref));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }

  has(version: number): boolean {
    return this.keys.has(version);
  }

  codec(isPhiKey: (key: string) => boolean): PhiCodec {
    return { seal: (ref, plain) => this.seal(ref, plain), open: (ref, sealed) => this.open(ref, sealed), isPhiKey };
  }
}

type KeyRow = { version: number; master_key_id: string; wrapped: string };

export class KeyRing {
  readonly #pool: Pool;
  readonly #kms: KeyManagement;
  readonly #clock: Clock;
  readonly #cache = new Map<string, Promise<OrgKeys>>();

  constructor(deps: { pool: Pool; kms: KeyManagement; clock: Clock }) {
    this.#pool = deps.pool;
    this.#kms = deps.kms;
    this.#clock = deps.clock;
  }

  /** The organization's keys, with every version `sealed` names loaded (its first key is made on first use). */
  async keysFor(organizationId: string, sealed: readonly (string | null | undefined)[] = []): Promise<OrgKeys> {
    let pending = this.#cache.get(organizationId);
    if (!pending) {
      pending = this.#load(organizationId);
      this.#cache.set(organizationId, pending);
      pending.catch(() => this.#cache.delete(organizationId));
    }
    let keys = await pending;
    const missing = sealed.some((s) => { const v = s ? sealedVersion(s) : undefined; return v !== undefined && !keys.has(v); });
    if (missing) {
      // Another instance rotated: read the versions again.
      pending = this.#load(organizationId);
      this.#cache.set(organizationId, pending);
      keys = await pending;
    }
    return keys;
  }

  /** Adds a new data key version: new values seal under it; older ones still open. */
  async rotateDataKey(organizationId: string): Promise<number> {
    const wrapped = await this.#kms.wrap(randomBytes(32), organizationId);
    const { rows } = await this.#pool.query<{ version: number }>(
      `insert into hipaa_data_keys (organization_id, version, master_key_id, wrapped, created_at)
       select $1, coalesce(max(version), 0) + 1, $2, $3, $4 from hipaa_data_keys where organization_id = $1
       returning version`,
      [organizationId, wrapped.masterKeyId, wrapped.wrapped, this.#clock.now()],
    );
    this.#cache.delete(organizationId);
    return rows[0]!.version;
  }

  /**
   * Re-wraps every data key not wrapped by the current master key (after a master key rotation).
   * Values sealed with the data keys do not change, so this runs while the service serves.
   */
  async rewrapAll(): Promise<number> {
    const current = this.#kms.currentKeyId();
    const { rows } = await this.#pool.query<KeyRow & { organization_id: string }>(
      'select organization_id, version, master_key_id, wrapped from hipaa_data_keys where master_key_id <> $1', [current]);
    for (const row of rows) {
      const key = await this.#kms.unwrap({ masterKeyId: row.master_key_id, wrapped: row.wrapped }, row.organization_id);
      const wrapped = await this.#kms.wrap(key, row.organization_id);
      await this.#pool.query(
        'update hipaa_data_keys set master_key_id = $3, wrapped = $4, rewrapped_at = $5 where organization_id = $1 and version = $2 and master_key_id = $6',
        [row.organization_id, row.version, wrapped.masterKeyId, wrapped.wrapped, this.#clock.now(), row.master_key_id]);
    }
    return rows.length;
  }

  async #load(organizationId: string): Promise<OrgKeys> {
    let rows = (await this.#pool.query<KeyRow>('select version, master_key_id, wrapped from hipaa_data_keys where organization_id = $1', [organizationId])).rows;
    if (rows.length === 0) {
      const wrapped = await this.#kms.wrap(randomBytes(32), organizationId);
      await this.#pool.query(
        `insert into hipaa_data_keys (organization_id, version, master_key_id, wrapped, created_at) values ($1, 1, $2, $3, $4)
         on conflict do nothing`, [organizationId, wrapped.masterKeyId, wrapped.wrapped, this.#clock.now()]);
      rows = (await this.#pool.query<KeyRow>('select version, master_key_id, wrapped from hipaa_data_keys where organization_id = $1', [organizationId])).rows;
    }
    const keys = new Map<number, Buffer>();
    for (const row of rows) keys.set(row.version, await this.#kms.unwrap({ masterKeyId: row.master_key_id, wrapped: row.wrapped }, organizationId));
    return new OrgKeys(organizationId, keys, Math.max(...keys.keys()));
  }
}
