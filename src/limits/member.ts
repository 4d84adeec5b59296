import { randomBytes } from 'node:crypto';

/** Unique per process; with the counter below, unique per counted call across replicas. */
const replica = randomBytes(6).toString('base64url');
let seq = 0;

/** A unique sorted-set member for one admitted call. */
export function nextMember(): string {
  seq = (seq + 1) % Number.MAX_SAFE_INTEGER;
  return `${replica}:${seq.toString(36)}`;
}
