/**
 * Errors that point at configuration name it: what the organization has configured (its voice
 * numbers, its senders, its routes, its connectors), listed in the message so the caller sees the
 * choices without another request. Long lists are cut (the error's `details` carry them whole).
 */

/** `a, b and c`; past `max` items, the first `max` and `and N more`; `none` when empty. */
export function listConfigured(items: readonly string[], max = 10): string {
  if (items.length === 0) return 'none';
  if (items.length > max) return `${items.slice(0, max).join(', ')} and ${items.length - max} more`;
  if (items.length === 1) return items[0]!;
  return `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}
