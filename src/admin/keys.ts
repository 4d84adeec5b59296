/**
 * Key operations shared by the admin API and the CLI. The key itself is
 * returned once, on creation; only its hash is kept.
 */
import { generateKey, hashKey, newKeyId, validImportedKey } from '../auth/keys.js';
import type { Clock } from '../clock.js';
import type { KeyRecord, Store } from '../store/types.js';

export class KeyServiceError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
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

const USER_RE = /^[A-Za-z0-9_.@:+-]{1,128}$/;

export class KeyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Called after a local deletion so this replica stops accepting the key at once. */
    private readonly onDeleted: (hash: string) => void = () => {},
  ) {}

  async create(input: unknown): Promise<CreatedKey> {
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      throw new KeyServiceError(400, 'invalid_body', 'body must be a JSON object {"user","name"?,"key"?}');
    }
    const { user, name, key, ...rest } = input as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) throw new KeyServiceError(400, 'unknown_field', `unknown field "${extra[0]}"`);
    if (typeof user !== 'string' || !USER_RE.test(user)) {
      throw new KeyServiceError(400, 'invalid_user', '"user" must be 1-128 characters of letters, digits and _ . @ : + -');
    }
    if (name !== undefined && (typeof name !== 'string' || name.length > 200)) {
      throw new KeyServiceError(400, 'invalid_name', '"name" must be a string of at most 200 characters');
    }
    let wire: string;
    if (key !== undefined) {
      if (typeof key !== 'string') throw new KeyServiceError(400, 'invalid_key', '"key" must be a string');
      const problem = validImportedKey(key);
      if (problem) throw new KeyServiceError(400, 'invalid_key', problem);
      wire = key.startsWith('sk-') ? key : `sk-${key}`;
    } else {
      wire = generateKey();
    }
    const rec: KeyRecord = {
      id: newKeyId(),
      user,
      name: typeof name === 'string' ? name : '',
      createdAt: new Date(this.clock.now()).toISOString(),
      hash: hashKey(wire),
    };
    if (!(await this.store.createKey(rec))) {
      throw new KeyServiceError(409, 'key_exists', 'that key is already registered');
    }
    return { id: rec.id, key: wire, user: rec.user, name: rec.name, createdAt: rec.createdAt };
  }

  async list(user: string): Promise<PublicKey[]> {
    return (await this.store.listKeys(user)).map(({ id, user: u, name, createdAt }) => ({ id, user: u, name, createdAt }));
  }

  async remove(id: string): Promise<PublicKey | null> {
    const r = await this.store.deleteKey(id);
    if (!r) return null;
    this.onDeleted(r.hash);
    return { id: r.id, user: r.user, name: r.name, createdAt: r.createdAt };
  }
}
