/**
 * The name a limit check's count is kept under. A decision runs as one script over all its
 * checks, and a Redis Cluster runs a script only on keys of one slot; Redis hashes only the part
 * of a key between its first `{` and the next `}` (the hash tag) when there is one. So the
 * subject is the hash tag, and every count of one user, or one address, lands in one slot
 * whatever its name: `{u:alice}:ft:w`, `{u:alice}:ft:d:2026-01-01`.
 */
import type { LimitCheck } from './types.js';

/**
 * Where a reset of `subject`'s limits leaves its time, in the slot of its counts (limit-resets.ts).
 * A `:` in its name keeps it apart from every count: a per-IP rule's name, which names its count,
 * has none, and the free tier's counts are `ft:…`.
 */
export function resetMarkKey(subject: string): string {
  return `{${subject}}:reset:at`;
}

export function limitKey(c: LimitCheck): string {
  return c.subject === undefined ? c.key : `{${c.subject}}:${c.key}`;
}
