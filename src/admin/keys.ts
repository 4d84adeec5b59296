/**
 * Key operations shared by the admin API and the CLI. The key itself is
 * returned once, on creation; only its hash is kept.
 */
import { generateKey, hashKey, newKeyId, validImportedKey } from '../auth/keys.js';
import type { Clock } from '../runtime/clock.js';
import { AdminError, AdminErrors } from './errors.js';
import { StoreUnavailableError } from '../store/unavailable.js';
import { keyId, userId } from './ids.js';
import type { KeyRecord, Store } from '../store/types.js';

/** A store call whose failure is the store's (answered 503 store_unavailable), told apart from sluice's own faults. */
function stored<T>(call: Promise<T>): Promise<T> {
  return call.catch((err: unknown) => {
    throw new StoreUnavailableError(err);
  });
}

export interface CreatedKey {
  id: string;
  key: string;
  user: string;
  name: string;
  createdAt: string;
}

export interface PublicKey {
  id: string;
  user: string;
  name: string;
  createdAt: string;
}

export class KeyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Called after a local deletion so this replica stops accepting the key at once. */
    private readonly onDeleted: (hash: string) => void = () => {},
  ) {}

  async create(input: unknown): Promise<CreatedKey> {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      throw new AdminError(AdminErrors.INVALID_BODY);
    }
    const { user, name, key, ...rest } = input as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) throw new AdminError(AdminErrors.UNKNOWN_FIELD, { field: extra[0]! });
    const owner = userId(user);
    if (name !== undefined && (typeof name !== 'string' || name.length > 200)) {
      throw new AdminError(AdminErrors.INVALID_NAME);
    }
    let wire: string;
    if (key !== undefined) {
      if (typeof key !== 'string') throw new AdminError(AdminErrors.INVALID_KEY, { reason: '"key" must be a string' });
      const problem = validImportedKey(key);
      if (problem) throw new AdminError(AdminErrors.INVALID_KEY, { reason: problem });
      wire = key.startsWith('sk-') ? key : `sk-${key}`;
    } else {
      wire = generateKey();
    }
    const rec: KeyRecord = {
      id: newKeyId(),
      user: owner,
      name: typeof name === 'string' ? name : '',
      createdAt: new Date(this.clock.now()).toISOString(),
      hash: hashKey(wire),
    };
    if (!(await stored(this.store.createKey(rec)))) throw new AdminError(AdminErrors.KEY_EXISTS);
    return { id: rec.id, key: wire, user: rec.user, name: rec.name, createdAt: rec.createdAt };
  }

  async list(user: string): Promise<PublicKey[]> {
    return (await stored(this.store.listKeys(userId(user)))).map(({ id, user: u, name, createdAt }) => ({ id, user: u, name, createdAt }));
  }

  async remove(id: string): Promise<PublicKey | null> {
    const r = await stored(this.store.deleteKey(keyId(id)));
    if (!r) return null;
    this.onDeleted(r.hash);
    return { id: r.id, user: r.user, name: r.name, createdAt: r.createdAt };
  }
}
