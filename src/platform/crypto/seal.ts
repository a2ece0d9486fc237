/**
 * Secrets the service must read back (webhook signing secrets, stored idempotent responses) are
 * sealed at rest with AES-256-GCM (96-bit nonce, 128-bit tag) under a key derived from APP_SECRET
 * per purpose, so a database dump alone does not reveal them.
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

export class Sealer {
  /**
   * The key as a KeyObject made once: `createCipheriv` given the key as a Buffer builds one on
   * every call, which was more than half of a seal's time (37 against 16 µs per sandbox payload;
   * the sandbox seals every send it records).
   */
  readonly #key: KeyObject;

  constructor(appSecret: string, purpose: string) {
    this.#key = createSecretKey(createHmac('sha256', appSecret).update(purpose).digest());
  }

  seal(plain: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `v1:${Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown sealed format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}
