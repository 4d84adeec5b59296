/**
 * "Whose key is this?": what the key sources say of a key an operator holds (a leaked one, a
 * client's "why 401"), for `POST /admin/keys/lookup` and `sluice keys lookup`. The key arrives in
 * a request body (never a URL) or on standard input (never argv), and is neither kept, logged nor
 * echoed: the answer names the key by its id.
 */
import type { Authenticator } from '../auth/authenticator.js';
import type { KeyRefusal } from '../auth/reasons.js';
import { RELAY_DB_SOURCE } from '../auth/relay-db/source.js';
import { AdminError, AdminErrors } from './errors.js';
import { StoreUnavailableError } from '../store/unavailable.js';

export interface KeyLookup {
  /** The key's id in the source that holds it (the relay's `tokens.id`, or sluice's `key_...`); null when none does. */
  id: string | null;
  /** Its user (the relay's `users.id`, or the registry's user id); null when no source holds it. */
  user: string | null;
  /** Which source holds it: the relay's database, sluice's own registry, or none. */
  source: 'relay-db' | 'registry' | null;
  /** Whether a request with it would authenticate now. */
  valid: boolean;
  /** Why not (the access line's vocabulary, src/auth/reasons.ts), null when valid. */
  reason: KeyRefusal['reason'] | 'empty_key' | null;
}

/** The longest key a lookup takes (the relay's column holds 128 characters, sluice's imports 256). */
const MAX_LOOKUP_KEY = 1024;

/** The key of a lookup body `{"key": "..."}`, or AdminError 400 (which never repeats the key). */
export function lookupRequest(body: unknown): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new AdminError(AdminErrors.INVALID_LOOKUP);
  const { key, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw new AdminError(AdminErrors.UNKNOWN_FIELD, { field: extra[0]!.slice(0, 64) });
  if (typeof key !== 'string' || key.length > MAX_LOOKUP_KEY) throw new AdminError(AdminErrors.INVALID_LOOKUP);
  return key.trim();
}

/**
 * Asks every key source about `key` as the request path would (one leading `sk-` and a
 * `-<suffix>` aside), but directly: the cache is neither read, filled nor emptied, and no lookup
 * budget is spent. A source that cannot answer makes it a StoreUnavailableError (503).
 */
export async function lookupKeyOwner(authenticator: Authenticator, key: string): Promise<KeyLookup> {
  let found: Awaited<ReturnType<Authenticator['inspect']>>;
  try {
    found = await authenticator.inspect(key);
  } catch (err) {
    throw new StoreUnavailableError(err);
  }
  const { answer } = found;
  const source = found.source === null ? null : found.source === RELAY_DB_SOURCE ? 'relay-db' : 'registry';
  if (!('reason' in answer)) return { id: answer.id, user: answer.user, source, valid: true, reason: null };
  const held = 'id' in answer && answer.id !== undefined;
  return { id: held ? answer.id! : null, user: held ? (answer.user ?? null) : null, source: held ? source : null, valid: false, reason: answer.reason };
}
