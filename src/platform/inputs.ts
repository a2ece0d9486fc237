/** Input fields every context's operations share: a resource id, a page request, money. */
import { z } from 'zod';
import { inputHints } from './validation.ts';

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

/**
 * A money field: an integer amount in cents (the smallest currency unit). Its problems say so
 * (`amount must be at least 100 cents`), and the OpenAPI document describes it.
 */
export function cents<S extends z.ZodNumber>(schema: S, example = 1000): S {
  const described = schema.meta({ description: `Amount in cents (the smallest currency unit), e.g. ${example} for ${(example / 100).toFixed(2)}` }) as S;
  inputHints.add(described, { unit: 'cents', example });
  return described;
}
