/**
 * The names limits go by, in one place: a limit's label (the `limit` of metrics, logs and the
 * store's script runs) and a subject (whose counts a check is on: part of its Redis keys, see
 * src/store/limit-key.ts, and what a limits reset names).
 */

/** The free tier's limit label. */
export const FREE_TIER_LIMIT = 'free_tier';

/** A per-IP rule's limit label. */
export function ipRuleLimit(rule: string): string {
  return `ip:${rule}`;
}

/** A user's subject: the free tier counts per user. */
export function userSubject(user: string): string {
  return `u:${user}`;
}

/** An address bucket's subject: the per-IP rules count per bucket. */
export function bucketSubject(bucket: string): string {
  return `ip:${bucket}`;
}

/** Whose a subject is (a limits reset names one), or null for a subject of neither kind. */
export function subjectOwner(subject: string): { user: string } | { bucket: string } | null {
  if (subject.startsWith('u:')) return { user: subject.slice('u:'.length) };
  if (subject.startsWith('ip:')) return { bucket: subject.slice('ip:'.length) };
  return null;
}
