/** What the safe HTTP client's test files share (safeHttp.vetting.test.ts, safeHttp.post.test.ts). */
import { expect } from 'vitest';
import { SafeHttpError, type UrlPolicy } from './safeHttp.ts';

export const STRICT: UrlPolicy = { allowLoopback: false };
export const LOOPBACK: UrlPolicy = { allowLoopback: true };

/** Runs `fn` and returns the SafeHttpError it rejects with (fails the test otherwise). */
export async function failureOf(fn: () => Promise<unknown>): Promise<SafeHttpError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SafeHttpError);
    return e as SafeHttpError;
  }
  throw new Error('expected a SafeHttpError, nothing was thrown');
}
