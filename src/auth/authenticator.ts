/**
 * Decides who a request is. Keys are looked up through narrow key sources (the relay's own
 * database, sluice's own registry), asked in order, behind a small cache: a known key costs no
 * round trip, deletions in sluice's registry evict at once through the store's change feed, a
 * source may bound how long its answers are trusted (the relay's database: a console change is
 * seen within that bound), and during an outage a key seen recently keeps working while an
 * unknown one cannot be judged. The cache holds hashes, never keys.
 *
 * A key is cached and looked up by what the relay looks up (keys.ts, lookupKey): `sk-<key>-<n>`
 * is `<key>`, so suffix variants share one entry and one lookup. Lookups of keys the replica does
 * not know cost a store round trip each: the lookup guard (lookup-guard.ts) bounds them per client
 * address and per replica.
 */
import { LRUCache } from 'lru-cache';
import type { Clock } from '../runtime/clock.js';
import type { KeyChange, KeyRecord } from '../store/types.js';
import { hashKey, lookupKey, sameHash } from './keys.js';
import type { LookupGuard } from './lookup-guard.js';
import { UNKNOWN_KEY, type KeyRefusal, type KeyStateReason, type UnauthorizedReason } from './reasons.js';

export interface KeyIdentity {
  id: string;
  user: string;
  hash: string;
  /** The name of the source that found the key (set by the authenticator): what the relay is sent depends on it. */
  source?: string;
}

/** The name of sluice's own registry as a key source (`storeKeySource`). */
export const REGISTRY_SOURCE = 'sluice';

/**
 * A source's answer: the key's identity; `unknown` (not a key of this source: ask the next one);
 * or a refusal (this source holds the key and it is not valid now: the verdict, whatever later
 * sources would say), with why and whose. A key the source holds only as deleted (`key_deleted`)
 * is as good as unknown to it: later sources are asked, and the refusal is the answer only if none
 * knows the key.
 */
export type SourceAnswer = KeyIdentity | 'unknown' | SourceRefusal;

export interface SourceRefusal {
  reason: KeyStateReason;
  id: string;
  user: string;
}

/** What the sources say of a key: who it is, or why it is not valid. */
type Answer = KeyIdentity | KeyRefusal;

function refused(a: Answer | SourceAnswer): a is KeyRefusal {
  return typeof a === 'object' && 'reason' in a;
}

/** A place keys can be looked up in. */
export interface KeySource {
  readonly name: string;
  /** How long a key this source found may be trusted without asking again (default: the authenticator's). */
  readonly maxAgeMs?: number;
  /** How long a key this source found keeps working while no source can be asked (default: the authenticator's). */
  readonly staleMs?: number;
  /**
   * `key` is the key as looked up (lookupKey of the presented key: no `sk-`, no `-<suffix>`), for
   * sources that must query by it (it is not kept); `hash` its hashKey. `background` says no
   * request waits for this answer (a renewal ahead of expiry), so the source may gather it with
   * others before asking.
   */
  find(key: string, hash: string, background: boolean): Promise<SourceAnswer>;
  /** A request now waits for a lookup asked as `background`: ask without further delay. */
  hurry?(): void;
  onChange?(listener: (change: KeyChange) => void): void;
}

export type AuthResult =
  | { ok: true; identity: KeyIdentity; key: string }
  /**
   * 401, and why (src/auth/reasons.ts); `keyId` and `user` when the refused key is held by a
   * source (disabled, expired, ...), or, for keys of two users, the first key's. `address_budget`:
   * the client address spent its budget of failed lookups, so an unknown key is refused without one.
   * `remembered`: decided without asking a source.
   */
  | { ok: false; reason: UnauthorizedReason; keyId?: string; user?: string; remembered?: true }
  /**
   * The replica's ceiling on lookups of unknown keys is reached, or its queue of requests waiting
   * for their address's lookups is full: the key's validity is unknown.
   */
  | { ok: false; reason: 'lookup_ceiling' | 'lookup_queue_full'; retryAfterSeconds: number; remembered: true }
  /** The client left while its request waited for its address's lookups: no lookup was started for it. */
  | { ok: false; reason: 'client_gone' }
  /** No source could answer: the key's validity is unknown. `source` names the first that failed (KeySource.name). */
  | { ok: false; reason: 'unavailable'; source: string; error: unknown };

export interface AuthenticatorOptions {
  /** How long a found key is trusted without asking the source again (deletions evict sooner). */
  positiveTtlMs?: number;
  /**
   * From this age on, a found key that is used is asked for again in the background, while the
   * cached answer still serves (default: three quarters of `positiveTtlMs`). A key in steady use
   * is thus renewed before it expires and its requests do not wait for the source; nothing older
   * than `positiveTtlMs` is trusted either way.
   */
  refreshAheadMs?: number;
  /** How long an unknown key is remembered as unknown (creations evict sooner). */
  negativeTtlMs?: number;
  /** How long a key seen valid keeps authenticating while the sources are unreachable. */
  staleTtlMs?: number;
  /** Most keys cached (default 50,000); past it the least recently used is forgotten. */
  maxEntries?: number;
  /** Bounds lookups of keys the replica does not know (none: every lookup is made). */
  guard?: LookupGuard;
}

interface Lookup extends LookupState {
  answer: Promise<Answer>;
}

/** What a lookup under way knows besides its answer. */
interface LookupState {
  /** Asked as a background renewal (its source may be gathering company for it). */
  background: boolean;
  /**
   * The last change heard for this hash while the lookup was under way; `flush` when every key
   * may have changed (the store's change feed reconnected, and what it missed is unknown).
   */
  raced: 'created' | 'deleted' | 'flush' | null;
}

/** Defaults: a found key is trusted for a minute and renewed, while in use, from three quarters of it. */
const DEFAULT_POSITIVE_TTL_MS = 60_000;

/** How long a failed background renewal waits before the next (the entry keeps serving until its TTL). */
const RENEW_RETRY_MS = 5_000;

interface Entry {
  identity: KeyIdentity | null;
  /** Why a key is not valid (identity null): kept with the answer, so a refusal from the cache still says why. */
  refusal?: KeyRefusal;
  at: number;
  /** Trusted until `at + ttl`; renewed in the background from `at + renewFrom`. */
  ttl: number;
  renewFrom: number;
  /** While no source can answer, a found key keeps working until `at + stale`. */
  stale: number;
  /**
   * A lookup failed and this entry was served stale: it serves from the cache for the rest of its
   * stale period (renewals are tried in the background) until an answer replaces it.
   */
  degraded?: boolean;
  /** No background renewal starts from this entry before this instant (one is under way, or failed). */
  renewAfter?: number;
}

export class Authenticator {
  /**
   * lru-cache holds the bound and the order (a request answered from an entry makes it the most
   * recent), not the lifetimes: an entry is trusted until its ttl, renewed from renewFrom while in
   * use, served stale only after a failed lookup, and kept past all of these as a key seen valid
   * (the lookup guard's and a flush's), stages one ttl cannot express; each entry keeps its own
   * instants. Reads that are not a use of the key (`peek`) leave the order alone.
   */
  private readonly cache: LRUCache<string, Entry>;
  /** Lookups under way, one per hash, shared by every request presenting that key meanwhile. */
  private readonly pending = new Map<string, Lookup>();
  private readonly positiveTtl: number;
  private readonly refreshAhead: number;
  private readonly negativeTtl: number;
  private readonly staleTtl: number;
  private readonly guard: LookupGuard | undefined;

  constructor(
    private readonly sources: readonly KeySource[],
    private readonly clock: Clock,
    opts: AuthenticatorOptions = {},
  ) {
    this.positiveTtl = opts.positiveTtlMs ?? DEFAULT_POSITIVE_TTL_MS;
    this.refreshAhead = Math.min(opts.refreshAheadMs ?? Math.floor((this.positiveTtl * 3) / 4), this.positiveTtl);
    this.negativeTtl = opts.negativeTtlMs ?? 2_000;
    this.staleTtl = opts.staleTtlMs ?? 15 * 60_000;
    this.cache = new LRUCache({ max: opts.maxEntries ?? 50_000 });
    this.guard = opts.guard;
    for (const s of sources) s.onChange?.((c) => this.onChange(c));
  }

  onChange(c: KeyChange): void {
    if (c.type === 'flush') {
      // Every answer is asked for again (a deletion may have been missed), but a key seen valid
      // stays: as the outage fallback (the feed can come back before the store answers, in a
      // failover, and such a key keeps working meanwhile, as in any outage), and as a key the
      // lookup guard knows, so that a flush does not send every key in use through its budgets.
      const refusals: string[] = [];
      for (const [hash, e] of this.cache) {
        if (e.identity === null) refusals.push(hash);
        else {
          e.ttl = 0;
          e.degraded = false;
        }
      }
      // Deleted after the walk: lru-cache's iterators do not allow deleting as they go.
      for (const hash of refusals) this.cache.delete(hash);
      // Lookups under way may have been answered before changes the disconnect hid: their answers
      // serve the requests already waiting but are not kept, and later requests start their own.
      for (const lookup of this.pending.values()) lookup.raced = 'flush';
      this.pending.clear();
      return;
    }
    // A key found valid is asked for again, but kept as a key seen valid, as a flush keeps it: its
    // creation's announcement often comes after its first use on another replica, and an outage
    // then must not refuse it (a deletion whose announcement was lost may precede the creation).
    // A refusal of it goes; a deletion takes any answer.
    const hit = this.cache.peek(c.hash);
    if (c.type === 'created' && hit !== undefined && hit.identity !== null) {
      hit.ttl = 0;
      hit.degraded = false;
    } else this.cache.delete(c.hash);
    const lookup = this.pending.get(c.hash);
    if (lookup) lookup.raced = c.type;
  }

  /** A cache entry still young enough to trust without asking a source. */
  private fresh(hash: string, now: number): Entry | undefined {
    const hit = this.cache.get(hash);
    if (hit === undefined) return undefined;
    const age = now - hit.at;
    if (age < hit.ttl) return hit;
    // The sources failed lately: a key seen valid keeps serving (within its stale period) while
    // renewals are tried in the background.
    return hit.identity !== null && hit.degraded === true && age < hit.stale ? hit : undefined;
  }

  /**
   * Every presented key must be valid, and all must name the same key owner;
   * a wrong key beside a valid one fails. `address` is the client's, for the lookup guard, and
   * `client` its end of the exchange: a request that waited for its address's lookups starts none
   * once its client has left. A refusal decided without asking a source (a key known not valid,
   * no key, the lookup guard's) is marked `remembered`.
   */
  async authenticate(presented: readonly string[], address?: string, client?: ClientEnd): Promise<AuthResult> {
    const identities: KeyIdentity[] = [];
    /** Whether a source was asked for this request. */
    let asked = false;
    const verdict = (stop?: KeyRefusal | typeof EMPTY_KEY): AuthResult => {
      const r = judge(presented, identities, stop);
      return r.ok || asked ? r : { ...r, remembered: true };
    };
    for (const presentedKey of presented) {
      const key = lookupKey(presentedKey);
      if (!plausible(key)) return verdict(EMPTY_KEY);
      const hash = hashKey(key);
      const now = this.clock.now();
      const hit = this.fresh(hash, now);
      if (hit !== undefined) {
        // Known not valid: refused whatever the other keys are.
        if (hit.identity === null) return verdict(hit.refusal ?? UNKNOWN_KEY);
        // A key in steady use is renewed before it expires, so its requests do not wait for the store.
        if (now - hit.at >= hit.renewFrom && !(now < (hit.renewAfter ?? 0))) this.renew(hash, key, hit, now);
        identities.push(hit.identity);
        continue;
      }
      let answer: Answer | Refused;
      try {
        answer = await this.lookup(hash, key, address, client);
      } catch (error) {
        if (error instanceof SourceUnavailableError) return { ok: false, reason: 'unavailable', source: error.source, error: error.cause };
        return { ok: false, reason: 'unavailable', source: 'unknown', error };
      }
      if ('ok' in answer) return answer;
      asked = true;
      if (refused(answer)) return verdict(answer);
      identities.push(answer);
    }
    return verdict();
  }

  /**
   * What the sources say of one key now, for an operator (`POST /admin/keys/lookup`): asked
   * directly, in order, without the cache, the lookup guard or the lookups under way, and nothing
   * kept, so the answer is today's and the requests' cache is neither filled nor emptied by it.
   * `source` is the name of the source that holds the key (null: none does). Throws when a source
   * that had to be asked could not answer.
   */
  async inspect(presented: string): Promise<{ answer: Answer | typeof EMPTY_KEY; source: string | null }> {
    const key = lookupKey(presented);
    if (!plausible(key)) return { answer: EMPTY_KEY, source: null };
    const hash = hashKey(key);
    let deleted: { answer: KeyRefusal; source: string } | null = null;
    for (const source of this.sources) {
      const found = await source.find(key, hash, false);
      if (found === 'unknown') continue;
      if (refused(found)) {
        if (found.reason !== 'key_deleted') return { answer: found, source: source.name };
        deleted ??= { answer: found, source: source.name };
      } else if (sameHash(found.hash, hash)) {
        return { answer: found, source: source.name };
      }
    }
    return deleted ?? { answer: UNKNOWN_KEY, source: null };
  }

  /** Asks the sources for a key not in the cache (or too old there), if the lookup guard lets it. */
  private async lookup(hash: string, key: string, address: string | undefined, client: ClientEnd | undefined): Promise<Answer | Refused> {
    if (this.guard === undefined || address === undefined) return this.ask(hash, key, false);
    for (;;) {
      // A key seen valid (its answer aged, or was flushed) and a lookup already under way cost no
      // new unknown lookup; anything else asks the guard first.
      if (this.pending.has(hash) || this.cache.peek(hash)?.identity) return this.ask(hash, key, false);
      const admission = this.guard.admit(address);
      if (admission.admitted) {
        const answer = this.ask(hash, key, false);
        answer.then(
          (a) => admission.settle(refused(a) ? 'invalid' : 'valid'),
          () => admission.settle('failed'),
        );
        return answer;
      }
      if (admission.reason === 'address_budget') return { ok: false, reason: 'address_budget', remembered: true };
      if (admission.reason !== 'address_pending') return { ok: false, reason: admission.reason, retryAfterSeconds: admission.retryAfterSeconds, remembered: true };
      // The address's lookups in flight hold its budget: judged again once one of them ends, when
      // this very key may have had its answer too.
      await admission.settled;
      const hit = this.fresh(hash, this.clock.now());
      if (hit !== undefined) return hit.identity ?? hit.refusal ?? UNKNOWN_KEY;
      // Its place would cost a lookup nobody waits for.
      if (client?.destroyed) return CLIENT_GONE;
    }
  }

  /**
   * Asks the sources in the background; the entry serves meanwhile. An answer replaces the entry;
   * if none comes (the store is down), the next renewal waits RENEW_RETRY_MS, not every request.
   */
  private renew(hash: string, key: string, entry: Entry, now: number): void {
    entry.renewAfter = now + Math.min(RENEW_RETRY_MS, entry.ttl - entry.renewFrom);
    this.ask(hash, key, true).catch(() => {});
  }

  /** The one lookup under way for this hash, started if there is none. */
  private ask(hash: string, key: string, background: boolean): Promise<Answer> {
    let lookup = this.pending.get(hash);
    if (lookup?.background && !background) {
      // A request joins a renewal that may be waiting for company: it goes now.
      lookup.background = false;
      for (const s of this.sources) s.hurry?.();
    }
    if (!lookup) {
      const state: LookupState = { raced: null, background };
      const answer = this.askSources(hash, key, background, this.cache.peek(hash), state).finally(() => {
        // A flush may have dropped this lookup and a newer one taken its place.
        if (this.pending.get(hash) === started) this.pending.delete(hash);
      });
      // The same object: a change heard while it is under way reaches askSources through it.
      const started: Lookup = Object.assign(state, { answer });
      this.pending.set(hash, started);
      lookup = started;
    }
    return lookup.answer;
  }

  private async askSources(hash: string, key: string, background: boolean, previous: Entry | undefined, lookup: LookupState): Promise<Answer> {
    // An answer describes the source as it was when asked: its age counts from then, so nothing
    // is trusted longer than its source allows, however long the asking took.
    const askedAt = this.clock.now();
    let failed: SourceUnavailableError | null = null;
    /** A source holds the key as deleted: the answer if no later source knows it. */
    let deleted: KeyRefusal | null = null;
    for (const source of this.sources) {
      let found: SourceAnswer;
      try {
        found = await source.find(key, hash, background);
      } catch (err) {
        failed ??= new SourceUnavailableError(source.name, err);
        continue;
      }
      if (refused(found)) {
        if (found.reason === 'key_deleted') {
          deleted ??= found;
          continue;
        }
        this.remember(hash, found, lookup.raced, askedAt);
        return found;
      }
      if (found !== 'unknown' && sameHash(found.hash, hash)) {
        const identity = { ...found, source: source.name };
        this.remember(hash, identity, lookup.raced, askedAt, source);
        return identity;
      }
    }
    if (failed !== null) {
      // Outage: a key seen valid recently keeps working; anything else is unknowable. Its next
      // requests are answered from the cache at once (a lookup would only wait for the same
      // failure), and it is asked for again in the background every RENEW_RETRY_MS.
      const now = this.clock.now();
      if (previous?.identity && now - previous.at < previous.stale) {
        if (this.cache.peek(hash) === previous) {
          previous.degraded = true;
          previous.renewAfter = now + RENEW_RETRY_MS;
        }
        return previous.identity;
      }
      throw failed;
    }
    const refusal = deleted ?? UNKNOWN_KEY;
    this.remember(hash, refusal, lookup.raced, askedAt);
    return refusal;
  }

  /** Caches a source's answer: its identity, or (hashes and ids only) why it is not valid. */
  private remember(hash: string, answer: Answer, raced: LookupState['raced'], at: number, source?: KeySource): void {
    const identity = refused(answer) ? null : answer;
    // A change arrived while we were asking and our answer may predate it: use it once, keep nothing.
    // Only a change that may contradict the answer counts (a creation cannot make a found key wrong).
    if (raced === 'flush' || (raced === 'deleted' && identity) || (raced === 'created' && !identity)) return;
    const entry: Entry = { identity, at, stale: source?.staleMs ?? this.staleTtl, ...this.lifetime(identity, source?.maxAgeMs) };
    // An unknown key (the common refusal) shares one frozen refusal: nothing more to keep.
    if (identity === null) entry.refusal = answer as KeyRefusal;
    this.cache.set(hash, entry);
  }

  /** How long an answer is trusted, and from when it is renewed while in use. */
  private lifetime(identity: KeyIdentity | null, maxAgeMs: number | undefined): { ttl: number; renewFrom: number } {
    if (!identity) return { ttl: this.negativeTtl, renewFrom: this.negativeTtl };
    if (maxAgeMs === undefined || maxAgeMs >= this.positiveTtl) return { ttl: this.positiveTtl, renewFrom: this.refreshAhead };
    return { ttl: maxAgeMs, renewFrom: Math.min(this.refreshAhead, Math.floor((maxAgeMs * 3) / 4)) };
  }
}

/**
 * No answer for a key because a source could not be asked: which one (the first that failed, in
 * the order sources are asked) tells a relay-database outage from a store outage.
 */
class SourceUnavailableError extends Error {
  override name = 'SourceUnavailableError';
  constructor(
    readonly source: string,
    override readonly cause: unknown,
  ) {
    super(`key source ${source} could not be asked: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** The client's end of a request (its ServerResponse): whether the client has left. */
export interface ClientEnd {
  readonly destroyed: boolean;
}

/** A refusal without a lookup (the lookup guard's), or none needed. */
type Refused = { ok: false; reason: 'address_budget'; remembered: true } | Extract<AuthResult, { reason: 'lookup_ceiling' | 'lookup_queue_full' | 'client_gone' }>;

const CLIENT_GONE = Object.freeze({ ok: false, reason: 'client_gone' } as const);

/** A key header that holds no key; credentials.ts tells which way it holds none. */
const EMPTY_KEY = Object.freeze({ reason: 'empty_key' as const });

/** An empty key as looked up (an empty header value, a bare `sk-`, `sk--3`) can never be a key: no lookup for it. */
function plausible(key: string): boolean {
  return key !== '';
}

/**
 * The verdict over every presented key, given the identities found so far in order and, when a
 * key was not valid, why (`stop`: the first key that failed, in the order keys are presented).
 */
function judge(
  presented: readonly string[],
  identities: readonly KeyIdentity[],
  stop?: KeyRefusal | typeof EMPTY_KEY,
): Extract<AuthResult, { ok: true } | { reason: UnauthorizedReason }> {
  if (presented.length === 0) return { ok: false, reason: 'no_key' };
  if (stop !== undefined) {
    return 'id' in stop && stop.id !== undefined ? { ok: false, reason: stop.reason, keyId: stop.id, user: stop.user } : { ok: false, reason: stop.reason };
  }
  const first = identities[0]!;
  for (const id of identities) if (id.user !== first.user) return { ok: false, reason: 'two_users', keyId: first.id, user: first.user };
  return { ok: true, identity: first, key: presented[0]! };
}

/** sluice's own key registry, as a key source. */
export function storeKeySource(
  store: {
    findKeyByHash(hash: string): Promise<KeyRecord | null>;
    onKeyChange(l: (c: KeyChange) => void): void;
  },
  /** Wraps each store call (latency and error metrics). */
  timed: <T>(fn: () => Promise<T>) => Promise<T> = (fn) => fn(),
): KeySource {
  return {
    name: REGISTRY_SOURCE,
    find: async (_key, hash) => {
      const r = await timed(() => store.findKeyByHash(hash));
      return r ? { id: r.id, user: r.user, hash: r.hash } : 'unknown';
    },
    onChange: (l) => store.onKeyChange(l),
  };
}

/**
 * The key sources in the order they are asked: the relay's database first, authoritative for the
 * keys it holds (a key it refuses is refused, whatever the registry says), then sluice's registry
 * for the keys it does not hold.
 */
export function keySources(registry: KeySource, relayDb: KeySource | null | undefined): KeySource[] {
  return relayDb ? [relayDb, registry] : [registry];
}
