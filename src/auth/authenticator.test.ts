import { describe, expect, it } from 'vitest';
import { ManualClock } from '../clock.js';
import type { KeyChange } from '../store/types.js';
import { Authenticator, type KeyIdentity, type KeySource } from './authenticator.js';
import { hashKey } from './keys.js';

const KEY = 'sk-test-key-0123456789abcdef';
const OTHER = 'sk-other-key-0123456789abcdef';

/** A key source whose answers the test releases by hand. */
function manualSource(known: Map<string, KeyIdentity>) {
  let listener: (c: KeyChange) => void = () => {};
  const waiting: Array<() => void> = [];
  let down = false;
  const source: KeySource = {
    name: 'manual',
    findByHash: (hash) =>
      new Promise((resolve, reject) => waiting.push(() => (down ? reject(new Error('down')) : resolve(known.get(hash) ?? null)))),
    onChange: (l) => (listener = l),
  };
  return {
    source,
    change: (c: KeyChange) => listener(c),
    release: () => waiting.splice(0).forEach((f) => f()),
    setDown: (d: boolean) => (down = d),
  };
}

const alice = (key: string, user = 'alice'): KeyIdentity => ({ id: `id-${key}`, user, hash: hashKey(key) });

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

describe('Authenticator', () => {
  it('answers from the cache without asking the source once a key was found', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    expect(a.cached([KEY])).toBeNull();
    const p = a.authenticate([KEY]);
    m.release();
    expect(await p).toMatchObject({ ok: true, identity: { user: 'alice' } });
    expect(a.cached([KEY])).toMatchObject({ ok: true, key: KEY });
  });

  it('keeps a found key when a creation of that key is announced during the lookup', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    const p = a.authenticate([KEY]);
    await settle();
    m.change({ type: 'created', hash: hashKey(KEY) });
    m.release();
    expect((await p).ok).toBe(true);
    expect(a.cached([KEY])).toMatchObject({ ok: true });
  });

  it('does not cache a found key whose deletion was announced during the lookup', async () => {
    const m = manualSource(new Map([[hashKey(KEY), alice(KEY)]]));
    const a = new Authenticator([m.source], new ManualClock());
    const p = a.authenticate([KEY]);
    await settle();
    m.change({ type: 'deleted', hash: hashKey(KEY) });
    m.release();
    await p;
    expect(a.cached([KEY])).toBeNull();
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
    expect(await ask([])).toEqual({ ok: false, reason: 'missing' });
    expect(await ask([KEY, 'sk-nope-0000000000000000'])).toEqual({ ok: false, reason: 'invalid' });
    expect(await ask([KEY, ''])).toEqual({ ok: false, reason: 'invalid' });
    expect(await ask([KEY, OTHER])).toEqual({ ok: false, reason: 'conflict' });
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
});
