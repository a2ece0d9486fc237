/** The sandbox provider's records (sandbox_sends) as the recipient got them: payloads are stored sealed. */
import { Sealer } from '../../src/platform/crypto/seal.ts';
import { SANDBOX_SENDS_PURPOSE } from '../../src/providers/messaging/sendStore.ts';
import { TEST_APP_SECRET } from './testApp.ts';

const sealer = new Sealer(TEST_APP_SECRET, SANDBOX_SENDS_PURPOSE);

/** A `sandbox_sends.payload` opened (it is `{ sealed: "v1:…" }` in the table). */
export function openSandboxPayload<T = any>(payload: unknown): T {
  const sealed = (payload as { sealed?: unknown } | null)?.sealed;
  if (typeof sealed !== 'string') throw new Error('sandbox_sends payload is not sealed');
  return JSON.parse(sealer.open(sealed)) as T;
}
