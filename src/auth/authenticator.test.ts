import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../test/support/clock.js';
import type { KeyChange } from '../store/types.js';
import { Authenticator, type AuthenticatorOptions, type AuthResult, type KeyIdentity, type KeySource, type SourceRefusal } from './authenticator.js';
import { hashKey, lookupKey } from './keys.js';
import { LookupGuard } from './lookup-guard.js';
import { DEFAULTS, type AuthConfig } from '../config/index.js';
import { nextTurn } from '../../test/support/time.js';

const KEY = 'sk-testkey0123456789abcdef';
const OTHER = 'sk-otherkey0123456789abcdef';

/** A key source whose answers the test releases by hand. */
function manualSource(known: Map<string, KeyIdentity>) {
  let listener: (c: KeyChange) => void = () => {};
  const waiting: Array<() => void> = [];
  let down = false;
  const source: KeySource = {
    name: 'manual',
    find: (_key, hash) => new Promise((resolve, reject) => waiting.push(() => (down ? reject(new Error('down')) : resolve(known.get(hash) ?? 'unknown')))),
    onChange: (l) => (listener = l),
  };
  return {
    source,
    change: (c: KeyChange) => listener(c),
    release: () => {
      for (const f of waiting.splice(0)) f();
    },
    setDown: (d: boolean) => (down = d),
  };
}

const alice = (key: string, user = 'alice'): KeyIdentity => ({ id: `id-${key}`, user, hash: hashKey(key) });

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

/**
 * What `a` answers for `presented` from its cache, without a source: null when it asks one (a
 * manual source then holds that lookup until the test releases it).
 */
async function cached(a: Authenticator, presented: string[]): Promise<AuthResult | null> {
  const asking = Symbol('asking');
  const r = await Promise.race([a.authenticate(presented), settle().then(() => asking)]);
  return r === asking ? null : (r as AuthResult);
}

describe('Authenticator', () => {
  it('answers from the cache without asking the source once a key was found', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    expect(await cached(a, [KEY])).toBeNull();
    const p = a.authenticate([KEY]);
    m.release();
    expect(await p).toMatchObject({ ok: true, identity: { user: 'alice' } });
    expect(await cached(a, [KEY])).toMatchObject({ ok: true, key: KEY });
  });

  it('keeps a found key when a creation of that key is announced during the lookup', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    const p = a.authenticate([KEY]);
    await settle();
    m.change({ type: 'created', hash: hashKey(KEY) });
    m.release();
    expect((await p).ok).toBe(true);
    expect(await cached(a, [KEY])).toMatchObject({ ok: true });
  });

  it('keeps a found key as seen valid when its creation is announced after it was found (the feed is slower than a first call on another replica), and drops a refusal of it', async () => {
    const known = new Map<string, KeyIdentity>();
    const m = manualSource(known);
    const a = new Authenticator([m.source], new ManualClock());
    // Refused before it existed, then created: the refusal goes.
    let p = a.authenticate([KEY]);
    m.release();
    expect((await p).ok).toBe(false);
    known.set(hashKey(KEY), alice(KEY));
    m.change({ type: 'created', hash: hashKey(KEY) });
    expect(await cached(a, [KEY])).toBeNull();
    m.release();
    await settle();
    // Found, then its creation heard: asked for again, but kept as a key seen valid, so that an
    // outage right then still serves it.
    p = a.authenticate([KEY]);
    await p;
    m.change({ type: 'created', hash: hashKey(KEY) });
    expect(await cached(a, [KEY])).toBeNull();
    m.setDown(true);
    m.release();
    await settle();
    p = a.authenticate([KEY]);
    m.release();
    expect(await p).toMatchObject({ ok: true, identity: { user: 'alice' } });
  });

  it('does not cache a found key whose deletion was announced during the lookup', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    const p = a.authenticate([KEY]);
    await settle();
    m.change({ type: 'deleted', hash: hashKey(KEY) });
    m.release();
    await p;
    expect(await cached(a, [KEY])).toBeNull();
  });

  it('refuses a wrong key beside a valid one, keys of two users, and no key at all', async () => {
    const known = new Map([
      [hashKey(KEY), alice(KEY)],
      [hashKey(OTHER), alice(OTHER, 'bob')],
    ]);
    const m = manualSource(known);
    const a = new Authenticator([m.source], new ManualClock());
    const ask = async (keys: string[]) => {
      const p = a.authenticate(keys);
      for (let i = 0; i < 3; i++) {
        await settle();
        m.release();
      }
      return p;
    };
    expect(await ask([])).toEqual({ ok: false, reason: 'no_key', remembered: true });
    expect(await ask([KEY, 'sk-nope-0000000000000000'])).toEqual({ ok: false, reason: 'unknown_key' });
    expect(await ask([KEY, ''])).toEqual({ ok: false, reason: 'empty_key', remembered: true }); // KEY is cached by now
    expect(await ask([KEY, OTHER])).toEqual({ ok: false, reason: 'two_users', keyId: `id-${KEY}`, user: 'alice' });
    expect(await ask([KEY, KEY.slice(3)])).toMatchObject({ ok: true, key: KEY });
  });

  it('keeps a key seen recently working while the source is down, but cannot judge an unseen one', async () => {
    const clock = new ManualClock();
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], clock, { positiveTtlMs: 1000, staleTtlMs: 60_000 });
    const warm = a.authenticate([KEY]);
    m.release();
    await warm;
    clock.advance(5000); // past the positive TTL: the source is asked again
    m.setDown(true);
    const again = a.authenticate([KEY]);
    await settle();
    m.release();
    expect((await again).ok).toBe(true);
    const unseen = a.authenticate([OTHER]);
    await settle();
    m.release();
    expect(await unseen).toMatchObject({ ok: false, reason: 'unavailable' });
    clock.advance(60_000); // past the stale bound
    const late = a.authenticate([KEY]);
    await settle();
    m.release();
    expect(await late).toMatchObject({ ok: false, reason: 'unavailable' });
  });

  it('names the source that could not be asked, so that a relay-database outage is told from a store outage', async () => {
    const source = (name: string, answer: 'down' | 'unknown'): KeySource => ({
      name,
      find: () => (answer === 'down' ? Promise.reject(new Error(`${name} is down`)) : Promise.resolve('unknown')),
    });
    const judge = (sources: KeySource[]) => new Authenticator(sources, new ManualClock()).authenticate([KEY]);
    expect(await judge([source('relay-db', 'down'), source('sluice', 'unknown')])).toMatchObject({ reason: 'unavailable', source: 'relay-db' });
    expect(await judge([source('relay-db', 'unknown'), source('sluice', 'down')])).toMatchObject({ reason: 'unavailable', source: 'sluice' });
    // Both down: the first asked, the one whose answer would have counted first.
    const both = await judge([source('relay-db', 'down'), source('sluice', 'down')]);
    expect(both).toMatchObject({ reason: 'unavailable', source: 'relay-db' });
    expect(String((both as { error: unknown }).error)).toContain('relay-db is down');
  });

  describe('renewing a key in use before it expires', () => {
    const warm = async (opts: AuthenticatorOptions = {}) => {
      const clock = new ManualClock();
      const known = new Map([[hashKey(KEY), alice(KEY)]]);
      const m = manualSource(known);
      let asked = 0;
      const counted: KeySource = { ...m.source, find: (k, h, b) => (asked++, m.source.find(k, h, b)) };
      const a = new Authenticator([counted], clock, { positiveTtlMs: 60_000, staleTtlMs: 15 * 60_000, ...opts });
      const p = a.authenticate([KEY]);
      m.release();
      await p;
      return { clock, known, m, a, asked: () => asked };
    };

    it('answers from the cache at once and asks the source in the background, once', async () => {
      const { clock, m, a, asked } = await warm();
      clock.advance(44_999);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(1); // before three quarters of the TTL: no renewal
      clock.advance(1);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true }); // served, not waited for
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(2); // one renewal, however many requests
      m.release();
      await settle();
      // Renewed at 45 s: still served from the cache past the first minute, without asking.
      clock.advance(30_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(2);
    });

    it('a key not used in the renewal window is asked for, and waited on, once it expires', async () => {
      const { clock, m, a, asked } = await warm();
      clock.advance(60_000);
      expect(await cached(a, [KEY])).toBeNull();
      const p = a.authenticate([KEY]);
      m.release();
      expect(await p).toMatchObject({ ok: true });
      expect(asked()).toBe(2);
    });

    it('a key gone from the store by the renewal is refused from then on', async () => {
      const { clock, known, m, a } = await warm();
      known.clear(); // deleted, and the announcement was lost
      clock.advance(50_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true }); // the renewal's answer is not in yet
      m.release();
      await settle();
      expect(await cached(a, [KEY])).toMatchObject({ ok: false, reason: 'unknown_key' });
    });

    it('a deletion announced during the renewal is not undone by its answer', async () => {
      const { clock, m, a } = await warm();
      clock.advance(50_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      m.change({ type: 'deleted', hash: hashKey(KEY) });
      m.release(); // the source still answered with the key: the answer predates the deletion
      await settle();
      expect(await cached(a, [KEY])).toBeNull();
    });

    it('a failed renewal changes nothing: the key serves until its TTL, and the renewal is retried 5 s later, not on every request', async () => {
      const { clock, m, a, asked } = await warm();
      m.setDown(true);
      clock.advance(50_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      m.release();
      await settle();
      clock.advance(4_999);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(2); // not retried on every request
      clock.advance(1);
      m.setDown(false);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(3); // retried after 5 s
      m.release();
      await settle();
      clock.advance(30_000); // renewed at 55 s: still cached at 85 s
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(asked()).toBe(3);
    });

    it('a renewal that fails outright (no stale answer to fall back on) is swallowed, not left unhandled', async () => {
      const { clock, m, a } = await warm({ staleTtlMs: 1_000 });
      m.setDown(true);
      clock.advance(50_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      m.release();
      await settle();
      expect(await cached(a, [KEY])).toMatchObject({ ok: true }); // still within its TTL
      clock.advance(10_000);
      expect(await cached(a, [KEY])).toBeNull();
    });

    it('a lookup started before a flush does not fill the cache after it', async () => {
      const { clock, m, a } = await warm();
      clock.advance(50_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true }); // a renewal is under way
      m.change({ type: 'flush' });
      m.release(); // its answer may predate what the flush stood for
      await settle();
      expect(await cached(a, [KEY])).toBeNull();
    });

    it('after a flush, a key seen valid is asked for again, and keeps working from memory while the sources cannot answer (a failover: the change feed is back before the store)', async () => {
      const { clock, known, m, a, asked } = await warm();
      clock.advance(1000);
      m.change({ type: 'flush' });
      expect(await cached(a, [KEY])).toBeNull(); // a deletion may have been missed: asked again
      m.setDown(true);
      const during = a.authenticate([KEY]);
      await settle();
      m.release();
      expect(await during).toMatchObject({ ok: true, identity: { user: 'alice' } });
      expect(asked()).toBe(2);
      // Once the source answers, what it says holds: a key deleted meanwhile stops.
      m.change({ type: 'flush' });
      m.setDown(false);
      known.delete(hashKey(KEY));
      const after = a.authenticate([KEY]);
      await settle();
      m.release();
      expect(await after).toMatchObject({ ok: false, reason: 'unknown_key' });
    });

    it('after a flush, a request does not share a lookup started before it', async () => {
      const { clock, m, a, asked } = await warm();
      clock.advance(50_000);
      await cached(a, [KEY]); // a renewal is under way
      expect(asked()).toBe(2);
      m.change({ type: 'flush' });
      const p = a.authenticate([KEY]);
      expect(asked()).toBe(3); // its own lookup
      m.release();
      expect(await p).toMatchObject({ ok: true });
    });
  });

  describe('several sources', () => {
    /** A source answering at once from a table; records what it was asked. */
    const table = (name: string, answers: Record<string, 'unknown' | SourceRefusal | KeyIdentity>, maxAgeMs?: number) => {
      const asked: Array<{ key: string; background: boolean }> = [];
      const source: KeySource = {
        name,
        maxAgeMs,
        find: async (key, _hash, background) => {
          asked.push({ key, background });
          // Sources are asked with the key as looked up (no sk-, no -suffix).
          return answers[`sk-${key}`] ?? 'unknown';
        },
      };
      return { source, asked };
    };

    it('asks the next source only for a key the first does not know', async () => {
      const relay = table('relay', { [KEY]: alice(KEY, '42') });
      const registry = table('registry', { [OTHER]: alice(OTHER, 'bob') });
      const a = new Authenticator([relay.source, registry.source], new ManualClock());
      expect(await a.authenticate([KEY])).toMatchObject({ ok: true, identity: { user: '42' } });
      expect(registry.asked).toEqual([]);
      expect(await a.authenticate([OTHER])).toMatchObject({ ok: true, identity: { user: 'bob' } });
      expect(relay.asked.map((q) => q.key)).toEqual([lookupKey(KEY), lookupKey(OTHER)]);
    });

    it('takes a refusal from the first source as the verdict, whatever a later source knows', async () => {
      const relay = table('relay', { [KEY]: { reason: 'key_disabled', id: '7', user: '42' } });
      const registry = table('registry', { [KEY]: alice(KEY, 'bob') });
      const a = new Authenticator([relay.source, registry.source], new ManualClock());
      expect(await a.authenticate([KEY])).toEqual({ ok: false, reason: 'key_disabled', keyId: '7', user: '42' });
      expect(registry.asked).toEqual([]);
    });

    it('says why a key is refused from the cache too, with the key id and user, and asks no source again', async () => {
      const relay = table('relay', { [KEY]: { reason: 'key_expired', id: '7', user: '42' } });
      const a = new Authenticator([relay.source], new ManualClock());
      expect(await a.authenticate([KEY])).toEqual({ ok: false, reason: 'key_expired', keyId: '7', user: '42' });
      // A suffix variant is the same key: the same cached refusal.
      expect(await cached(a, [`${KEY}-3`])).toEqual({ ok: false, reason: 'key_expired', keyId: '7', user: '42', remembered: true });
      expect(await cached(a, [OTHER, KEY].slice(1))).toEqual({ ok: false, reason: 'key_expired', keyId: '7', user: '42', remembered: true });
      expect(relay.asked).toHaveLength(1);
      // An unknown key's refusal is cached as such.
      expect(await a.authenticate([OTHER])).toEqual({ ok: false, reason: 'unknown_key' });
      expect(await cached(a, [OTHER])).toEqual({ ok: false, reason: 'unknown_key', remembered: true });
    });

    it('asks the next source for a key the first holds only as deleted, and says it was deleted, and whose, when none knows it', async () => {
      const deleted = { reason: 'key_deleted', id: '9', user: '42' } as const;
      const relay = table('relay', { [KEY]: deleted, [OTHER]: deleted });
      const registry = table('registry', { [OTHER]: alice(OTHER, 'bob') });
      const a = new Authenticator([relay.source, registry.source], new ManualClock());
      expect(await a.authenticate([KEY])).toEqual({ ok: false, reason: 'key_deleted', keyId: '9', user: '42' });
      expect(await cached(a, [KEY])).toEqual({ ok: false, reason: 'key_deleted', keyId: '9', user: '42', remembered: true });
      expect(await a.authenticate([OTHER])).toMatchObject({ ok: true, identity: { user: 'bob' } });
    });

    it('inspects a key in every source without the cache, and leaves the cache as it was', async () => {
      const relay = table('relay', { [KEY]: alice(KEY, '42'), [OTHER]: { reason: 'user_disabled', id: '8', user: '43' } });
      const registry = table('registry', {});
      const a = new Authenticator([relay.source, registry.source], new ManualClock());
      expect(await a.inspect(`${KEY}-7`)).toEqual({ answer: alice(KEY, '42'), source: 'relay' });
      expect(await a.inspect(OTHER)).toEqual({ answer: { reason: 'user_disabled', id: '8', user: '43' }, source: 'relay' });
      expect(await a.inspect('sk-nowhere0123456789')).toEqual({ answer: { reason: 'unknown_key' }, source: null });
      expect(await a.inspect('sk-')).toEqual({ answer: { reason: 'empty_key' }, source: null });
      // Nothing was kept: the requests' path still has to ask.
      relay.asked.length = 0;
      await a.authenticate([KEY]);
      await a.authenticate(['sk-nowhere0123456789']);
      expect(relay.asked.map((q) => q.key)).toEqual([lookupKey(KEY), lookupKey('sk-nowhere0123456789')]);
      // And a cached answer is not replaced by an inspection.
      relay.asked.length = 0;
      expect(await a.inspect(KEY)).toMatchObject({ source: 'relay' });
      expect(relay.asked).toEqual([{ key: lookupKey(KEY), background: false }]);
      expect(await a.authenticate([KEY])).toMatchObject({ ok: true });
      expect(relay.asked).toHaveLength(1);
    });

    it("trusts a source's answer no longer than the source allows, renewing it in the background while in use", async () => {
      const clock = new ManualClock();
      const relay = table('relay', { [KEY]: alice(KEY, '42') }, 10_000);
      const a = new Authenticator([relay.source], clock, { positiveTtlMs: 60_000 });
      await a.authenticate([KEY]);
      clock.advance(7_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(relay.asked).toHaveLength(1);
      clock.advance(600); // past three quarters of 10 s: renewed in the background, the request is answered now
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(relay.asked.at(-1)).toEqual({ key: lookupKey(KEY), background: true });
      await settle();
      expect(relay.asked).toHaveLength(2);
      clock.advance(10_500); // not used since the renewal's answer, 10.5 s ago: not trusted from the cache any more
      expect(await a.authenticate([KEY])).toMatchObject({ ok: true });
      expect(relay.asked).toHaveLength(3);
      expect(relay.asked.at(-1)).toEqual({ key: lookupKey(KEY), background: false });
    });
  });

  describe('timing of answers from a source with a short trust bound', () => {
    /** A source whose answers the test releases, with a trust bound of 10 s. */
    const slow = () => {
      const m = manualSource(new Map([[hashKey(KEY), alice(KEY, '42')]]));
      const asked: boolean[] = [];
      let hurried = 0;
      const source: KeySource = {
        ...m.source,
        maxAgeMs: 10_000,
        staleMs: 60_000,
        find: (k, h, background) => (asked.push(background), m.source.find(k, h, background)),
        hurry: () => void hurried++,
      };
      return { m, source, asked, hurried: () => hurried };
    };

    /** An authenticator over `slow()` that has found KEY once. */
    const warmSlow = async () => {
      const clock = new ManualClock();
      const s = slow();
      const a = new Authenticator([s.source], clock);
      const first = a.authenticate([KEY]);
      s.m.release();
      await first;
      return { clock, s, a };
    };

    it("counts an answer's age from when the source was asked, not from when it answered", async () => {
      const clock = new ManualClock();
      const s = slow();
      const a = new Authenticator([s.source], clock);
      const p = a.authenticate([KEY]);
      clock.advance(3_000); // the source takes 3 s to answer
      s.m.release();
      await p;
      clock.advance(6_900);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      clock.advance(200); // 10.1 s after it was asked
      expect(await cached(a, [KEY])).toBeNull();
    });

    it('asks at once when a request joins a background renewal the source may be holding back', async () => {
      const { clock, s, a } = await warmSlow();
      clock.advance(8_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true }); // renewal starts in the background
      expect(s.asked).toEqual([false, true]);
      expect(s.hurried()).toBe(0);
      clock.advance(2_500); // expired before the renewal answered: the request waits for it
      expect(await cached(a, [KEY])).toBeNull();
      const waiting = a.authenticate([KEY]);
      expect(s.hurried()).toBe(1);
      expect(s.asked).toHaveLength(2); // joined, not asked twice
      s.m.release();
      expect(await waiting).toMatchObject({ ok: true });
    });

    it('during an outage, answers a known key from the cache at once instead of waiting on a failing source for every request', async () => {
      const { clock, s, a } = await warmSlow();
      s.m.setDown(true);
      clock.advance(10_500); // past the trust bound: one request must ask, and gets the stale answer
      const p = a.authenticate([KEY]);
      s.m.release();
      expect(await p).toMatchObject({ ok: true });
      const askedSoFar = s.asked.length;
      // The next requests do not wait on the failing source...
      for (let i = 0; i < 5; i++) expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(s.asked).toHaveLength(askedSoFar);
      // ...which is tried again in the background every few seconds.
      clock.advance(5_000);
      expect(await cached(a, [KEY])).toMatchObject({ ok: true });
      expect(s.asked).toHaveLength(askedSoFar + 1);
      // The stale period still ends.
      s.m.release();
      await settle();
      clock.advance(60_000);
      expect(await cached(a, [KEY])).toBeNull();
    });
  });
  describe('the bound on cached keys', () => {
    it('forgets the key used least recently: a key in steady use stays cached, and keeps working through an outage', async () => {
      const keys = ['sk-steady0123456789abcdef', 'sk-once1aaaaaaaaaaaaaaaa', 'sk-once2aaaaaaaaaaaaaaaa', 'sk-once3aaaaaaaaaaaaaaaa'];
      const known = new Map(keys.map((k) => [hashKey(k), alice(k)]));
      let down = false;
      const asked: string[] = [];
      const source: KeySource = {
        name: 'registry',
        find: (key, hash) => (asked.push(key), down ? Promise.reject(new Error('down')) : Promise.resolve(known.get(hash) ?? 'unknown')),
      };
      const a = new Authenticator([source], new ManualClock(), { maxEntries: 3 });
      const [steady, ...others] = keys as [string, ...string[]];
      expect((await a.authenticate([steady])).ok).toBe(true); // cached first of all
      for (const key of others) {
        expect((await a.authenticate([key])).ok).toBe(true); // the last of them finds the cache full
        expect(await cached(a, [steady])).toMatchObject({ ok: true }); // steady is used in between, from the cache
      }
      expect(asked).toEqual(keys.map(lookupKey)); // each key asked for once: steady was never forgotten
      down = true;
      expect(await a.authenticate([steady])).toMatchObject({ ok: true, identity: { user: 'alice' } });
      expect(await a.authenticate([others[0]!])).toMatchObject({ ok: false, reason: 'unavailable' }); // the one forgotten
    });
  });

  describe('a key as the relay looks it up (issue 25, item 2)', () => {
    it('asks the source once for every suffix variant of a key, with the part before the suffix, and caches them as one', async () => {
      const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
      const keys: string[] = [];
      const a = new Authenticator([{ ...m.source, find: (k, h, b) => (keys.push(k), m.source.find(k, h, b)) }], new ManualClock());
      const first = a.authenticate([`${KEY}-1`]);
      const second = a.authenticate([`${KEY}-2`]); // joins the lookup under way
      m.release();
      expect(await first).toMatchObject({ ok: true, key: `${KEY}-1` });
      expect(await second).toMatchObject({ ok: true, key: `${KEY}-2` });
      expect(await cached(a, [`${KEY}-3`, KEY.slice(3)])).toMatchObject({ ok: true, key: `${KEY}-3` });
      expect(keys).toEqual([lookupKey(KEY)]);
    });

    it('refuses a key with nothing before its "-" without asking', async () => {
      const m = manualSource(new Map());
      const a = new Authenticator([{ ...m.source, find: () => Promise.reject(new Error('asked')) }], new ManualClock());
      expect(await a.authenticate(['sk--abc'])).toEqual({ ok: false, reason: 'empty_key', remembered: true });
      expect(await cached(a, ['-abc'])).toEqual({ ok: false, reason: 'empty_key', remembered: true });
    });
  });

  describe('the lookup guard (issue 25, item 1)', () => {
    /** An authenticator behind a lookup guard, over a source that holds `valid` and counts what it is asked. */
    const guarded = (auth: Partial<AuthConfig>, valid: string[] = [KEY]) => {
      const clock = new ManualClock();
      const m = manualSource(new Map(valid.map((k) => [hashKey(k), k === KEY ? alice(KEY) : alice(k, k)])));
      let asked = 0;
      const source: KeySource = { ...m.source, find: (k, h, b) => (asked++, m.source.find(k, h, b)) };
      const guard = new LookupGuard(() => ({ ...DEFAULTS.auth, ...auth }), clock);
      const a = new Authenticator([source], clock, { guard, positiveTtlMs: 1000, negativeTtlMs: 10 });
      const ask = async (keys: string[], address: string) => {
        const p = a.authenticate(keys, address);
        await settle();
        m.release();
        return p;
      };
      return { clock, m, a, guard, ask, asked: () => asked };
    };

    it("refuses an address's unknown keys without a lookup once its failures are spent, but still looks up a key seen valid", async () => {
      const { clock, ask, asked } = guarded({ failuresPerAddress: 2, unknownKeyLookupsPerSecond: 0 });
      expect(await ask([KEY], '10.0.0.1')).toMatchObject({ ok: true });
      expect(await ask([OTHER], '10.0.0.1')).toEqual({ ok: false, reason: 'unknown_key' });
      expect(await ask(['sk-nope'], '10.0.0.1')).toEqual({ ok: false, reason: 'unknown_key' });
      expect(asked()).toBe(3);
      expect(await ask(['sk-nope2'], '10.0.0.1')).toEqual({ ok: false, reason: 'address_budget', remembered: true });
      expect(await ask([KEY, 'sk-nope3'], '10.0.0.1')).toEqual({ ok: false, reason: 'address_budget', remembered: true });
      expect(asked()).toBe(3);
      clock.advance(5000); // KEY's answer is too old to trust: it is asked again, guard or not
      expect(await ask([KEY], '10.0.0.1')).toMatchObject({ ok: true });
      expect(asked()).toBe(4);
      expect(await ask(['sk-nope4'], '10.0.0.2')).toEqual({ ok: false, reason: 'unknown_key' });
    });

    it('lets keys met all at once from one address wait for its lookups in flight: valid ones all pass, wrong ones spend the budget and no more', async () => {
      const valid = ['sk-one0123456789abcdef', 'sk-two0123456789abcdef', 'sk-three0123456789abcdef'];
      const { m, a, asked } = guarded({ failuresPerAddress: 2, unknownKeyLookupsPerSecond: 0 }, valid);

      // A new replica meets three valid keys from one address at once: the third waits for a place.
      const passing = valid.map((k) => a.authenticate([k], '10.0.0.1'));
      await nextTurn();
      expect(asked()).toBe(2);
      m.release();
      await nextTurn();
      expect(asked()).toBe(3);
      m.release();
      expect(await Promise.all(passing)).toEqual(valid.map((k) => expect.objectContaining({ ok: true, identity: expect.objectContaining({ user: k }) })));

      // Three wrong keys at once: two are looked up and fail; the third is then refused without one.
      const failing = ['sk-nope1', 'sk-nope2', 'sk-nope3'].map((k) => a.authenticate([k], '10.0.0.2'));
      await nextTurn();
      m.release();
      expect(await Promise.all(failing)).toEqual([
        { ok: false, reason: 'unknown_key' },
        { ok: false, reason: 'unknown_key' },
        { ok: false, reason: 'address_budget', remembered: true },
      ]);
      expect(asked()).toBe(5);
    });

    it('starts no lookup for a waiter whose client left before its turn came', async () => {
      const keys = ['sk-one0123456789abcdef', 'sk-two0123456789abcdef', 'sk-three0123456789abcdef'];
      const { m, a, guard, asked } = guarded({ failuresPerAddress: 2, unknownKeyLookupsPerSecond: 0 }, keys);
      const clients = keys.map(() => ({ destroyed: false }));
      const results = keys.map((k, i) => a.authenticate([k], '10.0.0.1', clients[i]));
      await nextTurn();
      expect(asked()).toBe(2);
      expect(guard.waiting).toBe(1);
      clients[2]!.destroyed = true; // the third request's client leaves while it waits
      m.release();
      await nextTurn();
      m.release();
      expect(await results[2]).toEqual({ ok: false, reason: 'client_gone' });
      expect(asked()).toBe(2);
      expect(guard.waiting).toBe(0);
      expect(await results[0]).toMatchObject({ ok: true });
    });

    it('answers past the ceiling with its Retry-After, and a key seen valid before a flush is still not an unknown one', async () => {
      const { m, a, ask, asked } = guarded({ failuresPerAddress: 0, unknownKeyLookupsPerSecond: 1, unknownKeyLookupBurst: 1 });
      expect(await ask([KEY], 'a')).toMatchObject({ ok: true }); // a valid key gives its place back
      expect(await ask([OTHER], 'b')).toEqual({ ok: false, reason: 'unknown_key' });
      expect(await ask(['sk-nope'], 'c')).toEqual({ ok: false, reason: 'lookup_ceiling', retryAfterSeconds: 1, remembered: true });
      m.change({ type: 'flush' });
      expect(await cached(a, [KEY])).toBeNull(); // not trusted any more...
      expect(await ask([KEY], 'c')).toMatchObject({ ok: true }); // ...but known: looked up past the ceiling
      expect(asked()).toBe(3);
    });
  });
});
