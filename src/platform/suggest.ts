/**
 * "Did you mean …?": the known name closest to one a client sent (an unknown body field, an
 * unknown path segment). Names are compared without case, `_` or `-` first (`price_id` is
 * `priceId`), then by edit distance (a swap of two neighbours counts as one edit).
 */

/** The spelling-free form two names are compared in: `price_id`, `priceId` and `Price-ID` are equal. */
function fold(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, '');
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_r, i) => Array.from({ length: cols }, (_c, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `name`, when it is close enough to be a likely slip: the same name
 * spelled another way, or (for names of three characters or more) at most one edit per three
 * characters. Ties go to the earlier candidate; undefined when none is close.
 */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  const folded = fold(name);
  // The distance is at least the difference in length: a candidate further off than a slip is skipped unmeasured.
  const within = Math.max(1, Math.floor(folded.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const c of candidates) {
    if (c === name) continue;
    const other = fold(c);
    if (other !== folded && Math.abs(other.length - folded.length) > within) continue;
    const distance = editDistance(folded, other);
    if (distance === 0) return c;
    if (!best || distance < best.distance) best = { name: c, distance };
  }
  if (!best) return undefined;
  return folded.length >= 3 && best.distance <= Math.max(1, Math.floor(folded.length / 3)) ? best.name : undefined;
}
