/**
 * Deterministic pg-boss job ids (UUID-shaped, from a SHA-256 of the key): a second insert of the
 * same step is a no-op. One helper; two keyings, because the ids are stored: a waiting job's id
 * sits in pg-boss's table (a flow's wait step for days), and a step enqueued again after an
 * upgrade must get the id it got before, or it would run twice.
 */
import { createHash } from 'node:crypto';

function uuidOf(key: string, variant: '8' | 'a'): string {
  const hex = createHash('sha256').update(key).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** The id of a job keyed by its parts (the job name first, by convention): parts joined by NUL. */
export function stableJobId(...parts: readonly (string | number)[]): string {
  return uuidOf(parts.join('\u0000'), '8');
}

/**
 * The keying flows' step jobs and voice's gateway events were stored under (parts joined by `:`,
 * variant digit `a`), kept so their ids stay what they were.
 */
export function colonKeyedJobId(...parts: readonly (string | number)[]): string {
  return uuidOf(parts.join(':'), 'a');
}
