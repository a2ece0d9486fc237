/**
 * GraphQL inputs are camelCase; operations take the REST wire shape (snake_case). Converting
 * keys recursively keeps one input schema per operation. Values under free-form keys
 * (metadata, variables) are left as the client sent them.
 */
import { snake } from '../platform/naming.ts';

const FREE_FORM = new Set(['metadata', 'variables']);

export function toWire(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toWire);
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    out[snake(k)] = FREE_FORM.has(k) ? v : toWire(v);
  }
  return out;
}

/** Like {@link toWire} for one level, but keeps explicit nulls (an update's null clears a field). */
export function patchWire(input: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input)) if (v !== undefined) out[snake(k)] = v;
  return out;
}
