/**
 * Key management: wraps and unwraps the per-organization data keys that encrypt PHI. The built-in
 * implementation (local.ts) wraps with master keys from configuration; a cloud KMS (AWS KMS,
 * Google Cloud KMS, Vault transit) implements the same two calls, so data keys never leave it
 * unwrapped except in this process's memory.
 */
export type WrappedKey = {
  /** Which master key wrapped it (rotation re-wraps everything not under the current one). */
  masterKeyId: string;
  wrapped: string;
};

export interface KeyManagement {
  readonly name: string;
  /** The master key new wraps use. */
  currentKeyId(): string;
  /** Wraps a data key; `context` is bound as additional authenticated data (the organization). */
  wrap(dataKey: Buffer, context: string): Promise<WrappedKey>;
  /** Unwraps; throws when the master key is unknown or the wrap was altered or moved to another context. */
  unwrap(key: WrappedKey, context: string): Promise<Buffer>;
}
