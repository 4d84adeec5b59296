import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { StoreHealth } from './health.js';
import { MemoryStore } from './memory.js';
import type { Store } from './types.js';

/** A Redis-like store whose PING answers or fails as the test says. */
function pingable(): Store & { up: boolean } {
  const s = new MemoryStore() as unknown as Store & { up: boolean; kind: string };
  Object.defineProperty(s, 'kind', { value: 'redis' });
  s.up = false;
  s.ping = () => (s.up ? Promise.resolve() : Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379')));
  return s;
}

function logged(): { log: pino.Logger; msgs: string[] } {
  const msgs: string[] = [];
  return { log: pino({ level: 'info' }, { write: (l: string) => void msgs.push((JSON.parse(l) as { msg: string }).msg) }), msgs };
}

describe('StoreHealth', () => {
  it('stays `starting` until the store first answers (failures only set the error), then says `ok` / `failing`, logging each change once', async () => {
    const store = pingable();
    const { log, msgs } = logged();
    let now = 0;
    const h = new StoreHealth(store, () => now, log);
    let answers = 0;
    h.onAnswer(() => answers++);
    await h.probe();
    await h.probe();
    expect(h.get()).toEqual({ state: 'starting', since: 0, error: 'connect ECONNREFUSED 127.0.0.1:6379' });
    store.up = true;
    now = 1000;
    await h.probe();
    expect(h.get()).toEqual({ state: 'ok', since: 1000, error: null });
    store.up = false;
    now = 2000;
    await h.probe();
    await h.probe();
    expect(h.get()).toMatchObject({ state: 'failing', since: 2000 });
    store.up = true;
    now = 7000;
    await h.probe();
    expect(h.get().state).toBe('ok');
    expect(answers).toBe(2);
    expect(msgs).toEqual([
      'store (Redis) not reached yet: this replica is not ready until it answers',
      'store (Redis) answers',
      'store (Redis) does not answer: limits follow limits.onStoreError; readiness stays as it is (alert on sluice_store_up)',
      'store (Redis) answers',
    ]);
  });

  it('calls the embedded store always up, without asking it', async () => {
    const h = new StoreHealth(new MemoryStore(), () => 0, pino({ level: 'silent' }));
    await h.probe();
    expect(h.get().state).toBe('ok');
  });
});
