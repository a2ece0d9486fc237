/**
 * Local key management: data keys are wrapped with AES-256-GCM under a master key from
 * configuration (`HIPAA_MASTER_KEYS`, newest first; by default one key derived from APP_SECRET).
 * Several master keys may be configured at once, so rotation is: add a new key in front, restart,
 * run `admin hipaa rewrap` (or let the daily job do it), then drop the old key.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { KeyManagement, WrappedKey } from './types.ts';

export type MasterKey = { id: string; key: Buffer };

export class LocalKeyManagement implements KeyManagement {
  readonly name = 'local';
  readonly #keys: ReadonlyMap<string, Buffer>;
  readonly #current: string;

  constructor(masterKeys: readonly MasterKey[]) {
    if (masterKeys.length === 0) throw new Error('at least one master key is required');
    for (const k of masterKeys) if (k.key.length !== 32) throw new Error(`master key ${k.id} must be 32 bytes`);
    this.#keys = new Map(masterKeys.map((k) => [k.id, k.key]));
    this.#current = masterKeys[0]!.id;
  }

  currentKeyId(): string {
    return this.#current;
  }

  async wrap(dataKey: Buffer, context: string): Promise<WrappedKey> {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#keys.get(this.#current)!, nonce);
    cipher.setAAD(Buffer.from(context));
    const body = Buffer.concat([cipher.update(dataKey), cipher.final()]);
    return { masterKeyId: this.#current, wrapped: Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64') };
  }

  async unwrap(key: WrappedKey, context: string): Promise<Buffer> {
    const master = this.#keys.get(key.masterKeyId);
    if (!master) throw new Error(`master key ${key.masterKeyId} is not configured (HIPAA_MASTER_KEYS)`);
    const raw = Buffer.from(key.wrapped, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', master, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]);
  }
}

/** `HIPAA_MASTER_KEYS`: comma-separated `id:base64` pairs (32-byte keys), the current one first. */
export function parseMasterKeys(value: string): MasterKey[] {
  return value.split(',').map((s) => s.trim()).filter(Boolean).map((pair) => {
    const at = pair.indexOf(':');
    if (at <= 0) throw new Error('HIPAA_MASTER_KEYS entries are id:base64key');
    const id = pair.slice(0, at);
    const key = Buffer.from(pair.slice(at + 1), 'base64');
    if (key.length !== 32) throw new Error(`HIPAA_MASTER_KEYS: key ${id} must be 32 bytes (base64 of 32 random bytes)`);
    return { id, key };
  });
}
