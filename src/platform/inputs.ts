/** Input fields every context's operations share: a resource id and a page request. */
import { z } from 'zod';

/** `{ id }` of a get, update or delete (any prefix; an unknown id is the service's NOT_FOUND). */
export const idInput = z.object({ id: z.string().min(1).max(100) });

/**
 * `cursor` + `limit` of every list (see platform/pagination.ts); GraphQL's backward pages (`last`,
 * `before`) arrive as `backward` with `before`.
 */
export const pageInput = z.object({
  cursor: z.string().min(1).nullish(),
  /** Range-checked by keysetPage (400 VALIDATION_ERROR), like every list. */
  limit: z.number().int().nullish(),
  /** Pages toward the newest: the `limit` items just before this cursor (or the oldest, without one). */
  before: z.string().min(1).nullish(),
  backward: z.boolean().nullish(),
});
