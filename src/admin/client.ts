/**
 * The admin operations as the command line reaches them: directly, on the store and key sources
 * the sidecars use (the same Redis, key prefix, relay database and limits, from the same
 * settings), or through a running sluice's admin API (`--admin-url`), which the embedded store
 * needs since it lives inside that process. Both answer alike.
 */
import pino from 'pino';
import { Authenticator, keySources, storeKeySource } from '../auth/authenticator.js';
import { relayKeySourceFor } from '../auth/relay-db/source.js';
import type { Config } from '../config/index.js';
import { FreeTierLimiter } from '../limits/free-tier.js';
import { IpLimiter } from '../limits/ip.js';
import { systemClock } from '../runtime/clock.js';
import { RedisStore, redisStoreOptions } from '../store/redis/index.js';
import { namedAddress, userId } from './ids.js';
import { lookupKeyOwner, type KeyLookup } from './key-lookup.js';
import { KeyService } from './keys.js';

export interface AdminClient {
  createKey(body: Record<string, string>): Promise<unknown>;
  listKeys(user: string): Promise<unknown>;
  /** False when no key has that id. */
  deleteKey(id: string): Promise<boolean>;
  lookupKey(key: string): Promise<KeyLookup>;
  /** A user's free-tier state; with `reset`, after resetting it on every replica. */
  userLimits(user: string, reset: boolean): Promise<unknown>;
  /** An address's per-IP state; with `reset`, after resetting it on every replica. */
  ipLimits(address: string, reset: boolean): Promise<unknown>;
  close(): Promise<void>;
}

/** A refusal of the admin API or the store, as the command line reports it (exit code 1). */
export class AdminCallError extends Error {
  override name = 'AdminCallError';
}

/** Directly on Redis, as the sidecars configured by `cfg` (which must name Redis). */
export async function directClient(cfg: Config, redisUrl: string): Promise<AdminClient> {
  // A longer command bound than the sidecars', since a person waits here, not a request.
  const store = new RedisStore({ ...redisStoreOptions(cfg.redis, redisUrl), commandTimeoutMs: Math.max(2000, cfg.redis.commandTimeoutMs) });
  try {
    await store.waitReady(5000);
  } catch (err) {
    await store.close();
    throw new AdminCallError(`cannot reach Redis: ${(err as Error).message}`);
  }
  const keys = new KeyService(store, systemClock);
  const remember = { rememberRefusalsMs: 0 };
  const freeTier = new FreeTierLimiter(cfg.freeTier, store, systemClock, remember);
  const ipLimiter = new IpLimiter(cfg.ipLimits, store, systemClock, { ...remember, ipv6Prefix: cfg.ipv6Prefix });
  // Only the lookup needs the relay's database: opened on first use.
  let relay: ReturnType<typeof relayKeySourceFor> | undefined;
  return {
    createKey: (body) => keys.create(body),
    listKeys: async (user) => ({ keys: await keys.list(user) }),
    deleteKey: async (id) => (await keys.remove(id)) !== null,
    lookupKey: async (key) => {
      relay ??= relayKeySourceFor(cfg.relayDb, systemClock, pino({ level: 'silent' }));
      return lookupKeyOwner(new Authenticator(keySources(storeKeySource(store), relay), systemClock), key);
    },
    userLimits: async (user, reset) => {
      // The admin API's rule: a `{` or `}` would break the hash tag that keeps a user's counts in one slot.
      const id = userId(user);
      return { freeTier: reset ? await freeTier.reset(id) : await freeTier.state(id) };
    },
    ipLimits: async (text, reset) => {
      const { address } = namedAddress(ipLimiter, text);
      return { ipLimits: reset ? await ipLimiter.reset(address) : await ipLimiter.state(address) };
    },
    close: async () => {
      await relay?.close();
      await store.close();
    },
  };
}

/** How long the CLI waits for the admin API's answer before it gives up (exit 1). */
const ADMIN_CALL_TIMEOUT_MS = 30_000;

/** Through a running sluice's admin API at `base`, with its admin token. */
export function apiClient(base: string, token: string): AdminClient {
  const call = async (method: string, path: string, body?: unknown): Promise<Response> => {
    let r: Response;
    try {
      r = await fetch(new URL(path, base), {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(ADMIN_CALL_TIMEOUT_MS),
      });
    } catch (err) {
      throw new AdminCallError(`cannot reach the admin API at ${base}: ${(err as Error).message}`);
    }
    if (r.status >= 400 && !(r.status === 404 && method === 'DELETE' && path.startsWith('/admin/keys/'))) {
      throw new AdminCallError(`admin API answered ${r.status}: ${await r.text()}`);
    }
    return r;
  };
  const segment = encodeURIComponent;
  return {
    createKey: async (b) => (await call('POST', '/admin/keys', b)).json(),
    listKeys: async (user) => (await call('GET', `/admin/keys?user=${segment(user)}`)).json(),
    deleteKey: async (id) => (await call('DELETE', `/admin/keys/${segment(id)}`)).status === 204,
    lookupKey: async (key) => (await (await call('POST', '/admin/keys/lookup', { key })).json()) as KeyLookup,
    userLimits: async (user, reset) => (await call(reset ? 'DELETE' : 'GET', `/admin/users/${segment(user)}/limits`)).json(),
    ipLimits: async (address, reset) => (await call(reset ? 'DELETE' : 'GET', `/admin/ips/${segment(address)}/limits`)).json(),
    close: async () => {},
  };
}
