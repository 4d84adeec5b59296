/**
 * Why a request's authentication failed: the fixed vocabulary of the access line's `reason`
 * (docs/operations.md, Logs; docs/authentication.md, "Why 401"). The client never sees it: every
 * one of these is the contract's one 401 body. A refusal that names a key found in a key source
 * carries that key's id and user, never the key.
 */

/** What a key header on its own says (src/auth/credentials.ts decides these from the headers). */
export type HeaderReason =
  /** No key header at all. */
  | 'no_key'
  /** Only key headers that do not count on this path (`x-api-key` on `/v1/chat/completions`). */
  | 'wrong_header'
  /** A key header sent twice (two `Authorization` lines, two `x-api-key` lines, ...). */
  | 'repeated_header'
  /** `Authorization` without the `Bearer` scheme. */
  | 'not_bearer'
  /** A key header that holds no key: empty, `Bearer` alone, `sk-` alone, `sk--7`. */
  | 'empty_key';

/** What a key source says of a key it holds and refuses (src/auth/relay-db/rules.ts). */
export type KeyStateReason =
  /** Deleted in the relay's console (a new-api soft delete). */
  | 'key_deleted'
  | 'key_disabled'
  | 'key_expired'
  /** Its quota is spent (and it is not unlimited). */
  | 'key_exhausted'
  | 'user_disabled'
  /** Its user was deleted in the console (a soft delete: the relay answers such a key 500). */
  | 'user_deleted'
  /** Its user row is gone (an administrator's hard delete left the token). */
  | 'user_missing';

/** Every reason a 401 is given for. */
export type UnauthorizedReason =
  | HeaderReason
  | KeyStateReason
  /** No key source knows the key: wrong, incomplete, or deleted from sluice's registry. */
  | 'unknown_key'
  /** Keys of two different users in one request. */
  | 'two_users'
  /** An unknown key from an address that spent its failed lookups (`auth.failuresPerAddress`): refused without a lookup. */
  | 'address_budget';

/** Why a key is not valid, as a cache entry or a lookup keeps it: the reason, and the key's id and user when a source holds it. */
export interface KeyRefusal {
  reason: KeyStateReason | 'unknown_key';
  id?: string;
  user?: string;
}

export const UNKNOWN_KEY: KeyRefusal = Object.freeze({ reason: 'unknown_key' });
