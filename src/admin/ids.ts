/**
 * The ids the admin API and the key commands take, checked by one rule wherever they arrive (a
 * JSON body, a path segment, a query parameter): 1-128 characters of `[A-Za-z0-9_.@:+-]`, after
 * percent-decoding. A user id becomes the Redis Cluster hash tag of its counts (`{u:<id>}`,
 * src/store/limit-key.ts), which a `{` or `}` would break, and it is echoed in answers; an id
 * outside the rule is refused with 400 and never repeated back.
 */
import { AdminError, AdminErrors, type AdminErrorSpec } from './errors.js';
import type { IpLimiter } from '../limits/ip.js';

/** Letters, digits and `_ . @ : + -`, 1 to 128 of them. */
const ID_PATTERN = /^[A-Za-z0-9_.@:+-]{1,128}$/;

function checked(value: unknown, refusal: AdminErrorSpec): string {
  if (typeof value !== 'string' || !ID_PATTERN.test(value)) throw new AdminError(refusal);
  return value;
}

/** A user id, or AdminError `invalid_user` (400). */
export function userId(value: unknown): string {
  return checked(value, AdminErrors.INVALID_USER);
}

/** A key id (sluice makes them as `key_` and 20 hex digits), or AdminError `invalid_key_id` (400). */
export function keyId(value: unknown): string {
  return checked(value, AdminErrors.INVALID_KEY_ID);
}

/**
 * A client address as an operator names it (`/admin/ips/<address>/limits`, `sluice ip-limits`):
 * canonical, with the bucket its per-IP counts are kept under, or AdminError `invalid_address` (400).
 */
export function namedAddress(ipLimiter: IpLimiter, text: string): { address: string; bucket: string } {
  const at = ipLimiter.bucketOf(text);
  if (at === null) throw new AdminError(AdminErrors.INVALID_ADDRESS);
  return at;
}
