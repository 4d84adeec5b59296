/**
 * Hostile traffic, round two (issue 25, items 1 and 2): what wrong keys, and valid keys with a
 * `-<suffix>`, cost the key stores. A running sluice over real sockets, in front of the relay
 * stand-in, with keys in Redis (sluice's registry) or in the relay's PostgreSQL database; clients
 * call from distinct loopback addresses (127.0.0.0/8 is all this machine's). Lookups are read from
 * sluice's own counters of store commands and database statements.
 */
import http from 'node:http';
import type { Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../support/clock.js';
import { startHarness, type Harness } from '../support/harness.js';
import { expectContract401, metricReader } from '../support/helpers.js';
import { chat, json, request, type RawResponse } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { consoleKey, createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { lockTokens } from '../support/relay-db-lock.js';
import { eventually, within } from '../support/time.js';

const agents = new Map<string, http.Agent>();
/** An agent whose connections leave from `ip`. */
function from(ip: string): http.Agent {
  let a = agents.get(ip);
  if (a === undefined) agents.set(ip, (a = new http.Agent({ localAddress: ip })));
  return a;
}
afterAll(() => {
  for (const a of agents.values()) a.destroy();
});

const wrongKey = (): string => `sk-${consoleKey()}`;

/** A key source that costs a round trip: sluice's registry in Redis, or the relay's database in PostgreSQL. */
interface Source {
  name: string;
  start(file: Record<string, unknown>, extra?: { clock?: ManualClock; log?: Logger }): Promise<Harness>;
  /** A valid key, never used. */
  validKey(h: Harness): Promise<string>;
  /** Lookups made so far (Redis commands, or statements: sequential calls make one each). */
  lookups(h: Harness): () => Promise<number>;
  close(): Promise<void>;
}

function redisRegistry(): Source {
  let n = 0;
  return {
    name: "sluice's registry in Redis",
    start: (file, extra = {}) => startHarness({ store: 'redis', file, ...extra }),
    validKey: async (h) => (await h.createKey(`u${n++}`)).key,
    lookups: (h) => metricReader(h, 'sluice_store_seconds_count', { op: 'find_key' }),
    close: async () => {},
  };
}

function relayDatabase(): Source {
  let fx: RelayDbFixture | undefined;
  return {
    name: "the relay's database in PostgreSQL",
    async start(file, extra = {}) {
      fx = await createRelayDb('postgres');
      return startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: fx.dsn }, file, ...extra });
    },
    validKey: async () => `sk-${(await fx!.addToken(await fx!.addUser())).key}`,
    lookups: (h) => metricReader(h, 'sluice_relay_db_seconds_count', { op: 'lookup' }),
    close: async () => fx?.drop(),
  };
}

describe.each([redisRegistry(), relayDatabase()])('wrong keys from one address, keys in $name (issue 25, item 1)', (source) => {
  let h: Harness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const logs = capturedLog();
  beforeAll(async () => {
    // The clock stands still unless the test moves it: no budget refills behind its back.
    h = await source.start({ auth: { failuresPerAddress: 5, failureWindowSeconds: 60 } }, { clock, log: logs.log });
  });
  afterAll(async () => {
    await h?.close();
    await source.close();
  });

  it("spend the address's budget of failed lookups; then its unknown keys get the contract's 401 from memory, with no lookup, while known keys and other addresses are served", async () => {
    const lookups = source.lookups(h);
    const refused = metricReader(h, 'sluice_key_lookups_refused_total', { reason: 'address_budget' });
    const known = await source.validKey(h);
    expect((await chat(h.url, known, { agent: from('127.0.0.2') })).status).toBe(200);
    const before = await lookups();

    for (let i = 0; i < 5; i++) expectContract401(await chat(h.url, wrongKey(), { agent: from('127.0.0.2') }));
    expect((await lookups()) - before).toBe(5);
    // The budget is spent: ten more wrong keys, and not one lookup.
    for (let i = 0; i < 10; i++) expectContract401(await chat(h.url, wrongKey(), { agent: from('127.0.0.2') }));
    expect((await lookups()) - before).toBe(5);

    // A key this replica knows still passes from that address (answered from memory).
    expect((await chat(h.url, known, { agent: from('127.0.0.2') })).status).toBe(200);
    // A valid key it has never seen cannot be told from a wrong one without a lookup: 401 there...
    const fresh = await source.validKey(h);
    expectContract401(await chat(h.url, fresh, { agent: from('127.0.0.2') }));
    expect((await lookups()) - before).toBe(5);
    // ...and 200 from any other address.
    expect((await chat(h.url, fresh, { agent: from('127.0.0.3') })).status).toBe(200);
    expect((await lookups()) - before).toBe(6);
    expect(await refused()).toBe(11);

    // The access line says why; one warning names the address.
    const lines = logs.lines.filter((l) => l.msg === 'request' && l.ip === '127.0.0.2' && l.decision === 'unauthorized');
    expect(lines).toHaveLength(16);
    expect(lines.filter((l) => l.reason === 'address_budget')).toHaveLength(11);
    // The first five were looked up, and found unknown.
    expect(lines.slice(0, 5).every((l) => l.reason === 'unknown_key')).toBe(true);
    expect(logs.lines.filter((l) => l.level === 40 && /spent its budget of failed key lookups/.test(String(l.msg)))).toEqual([
      expect.objectContaining({ ip: '127.0.0.2', failures: 5, windowSeconds: 60 }),
    ]);

    // The budget refills evenly over the window: one lookup every 12 s, and a valid key gives its place back.
    clock.advance(12_000);
    const later = await source.validKey(h);
    expect((await chat(h.url, later, { agent: from('127.0.0.2') })).status).toBe(200);
    expect((await chat(h.url, await source.validKey(h), { agent: from('127.0.0.2') })).status).toBe(200);
    expectContract401(await chat(h.url, wrongKey(), { agent: from('127.0.0.2') }));
    expectContract401(await chat(h.url, wrongKey(), { agent: from('127.0.0.2') }));
    expect((await lookups()) - before).toBe(9);
  });

  it("lets a cold replica meet many valid keys from one address at once: none is answered 401 for the lookups still in flight; as many wrong keys at once cost the budget's lookups and no more", async () => {
    const refused = metricReader(h, 'sluice_key_lookups_refused_total', { reason: 'address_budget' });
    const before = await refused();
    const keys = await Promise.all(Array.from({ length: 20 }, () => source.validKey(h)));
    const served = await Promise.all(keys.map((k) => chat(h.url, k, { agent: from('127.0.0.4') })));
    expect(served.map((r) => r.status)).toEqual(keys.map(() => 200));
    expect((await refused()) - before).toBe(0);

    const wrong = await Promise.all(Array.from({ length: 20 }, () => chat(h.url, wrongKey(), { agent: from('127.0.0.5') })));
    for (const r of wrong) expectContract401(r);
    // Five looked up (the budget), fifteen refused from memory once those five failed.
    expect((await refused()) - before).toBe(15);
  });
});

describe('wrong keys from addresses of one IPv6 /64, through a trusted proxy (issue 25, items 1 and 7)', () => {
  const source = redisRegistry();
  let h: Harness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  beforeAll(async () => {
    h = await source.start({ trustedProxies: ['127.0.0.1/32'], auth: { failuresPerAddress: 3, failureWindowSeconds: 60 } }, { clock });
  });
  afterAll(async () => {
    await h?.close();
  });

  const viaProxy = (key: string, client: string): Promise<RawResponse> =>
    request(h.url, 'POST', '/v1/chat/completions', {
      headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': client },
      body: json({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      agent: from('127.0.0.1'),
    });

  it('share one budget: a client rotating through its /64 gets no more lookups than one address; another /64 has its own', async () => {
    const lookups = source.lookups(h);
    const before = await lookups();
    for (let i = 1; i <= 6; i++) expectContract401(await viaProxy(wrongKey(), `2001:db8:7:7::${i.toString(16)}`));
    expect((await lookups()) - before).toBe(3);
    expectContract401(await viaProxy(wrongKey(), '2001:db8:7:8::1'));
    expect((await lookups()) - before).toBe(4);
  });
});

describe.each([redisRegistry(), relayDatabase()])('unknown keys from many addresses, keys in $name (issue 25, item 1)', (source) => {
  let h: Harness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const logs = capturedLog();
  beforeAll(async () => {
    h = await source.start({ auth: { failuresPerAddress: 0, unknownKeyLookupsPerSecond: 2, unknownKeyLookupBurst: 4 } }, { clock, log: logs.log });
  });
  afterAll(async () => {
    await h?.close();
    await source.close();
  });

  it("reach the replica's ceiling on lookups of unknown keys: past it, 503 store_unavailable with Retry-After at once, never a hang; known keys pass, valid new keys give their place back", async () => {
    const refused = metricReader(h, 'sluice_key_lookups_refused_total', { reason: 'lookup_ceiling' });
    const known = await source.validKey(h);
    expect((await chat(h.url, known, { agent: from('127.0.0.2') })).status).toBe(200);

    // Twelve wrong keys at once, each from its own address (no address budget here): four lookups, eight refusals.
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => chat(h.url, wrongKey(), { agent: from(`127.0.1.${i + 1}`) })));
    expect(performance.now() - started).toBeLessThan(5000);
    const byStatus = (s: number) => answers.filter((a) => a.status === s);
    expect(byStatus(401)).toHaveLength(4);
    expect(byStatus(503)).toHaveLength(8);
    for (const a of byStatus(503)) {
      expect(a.headers['retry-after']).toBe('1');
      const body = JSON.parse(a.text) as { error: { code: string; message: string; type: string } };
      expect(Object.keys(body.error)).toEqual(['code', 'message', 'type']);
      expect(body.error).toMatchObject({ code: 'store_unavailable', type: 'new_api_error' });
    }

    // A known key still passes; a valid key never seen may be a new one: 503, not 401, until the ceiling lets it through.
    expect((await chat(h.url, known, { agent: from('127.0.0.3') })).status).toBe(200);
    const fresh = await source.validKey(h);
    const wait = await chat(h.url, fresh, { agent: from('127.0.0.3') });
    expect(wait.status).toBe(503);
    expect(wait.headers['retry-after']).toBe('1');
    expect(await refused()).toBe(9);
    const lines = logs.lines.filter((l) => l.msg === 'request' && l.decision === 'store_unavailable');
    expect(lines).toHaveLength(9);
    expect(lines.every((l) => l.reason === 'lookup_ceiling' && l.status === 503)).toBe(true);
    expect(logs.lines.filter((l) => l.level === 40 && /lookups of unknown keys at their ceiling/.test(String(l.msg)))).toHaveLength(1);

    // After Retry-After, room for two: the valid key gets in, and valid new keys give back their place, so five in a row do.
    clock.advance(1000);
    expect((await chat(h.url, fresh, { agent: from('127.0.0.3') })).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await chat(h.url, await source.validKey(h), { agent: from('127.0.0.3') })).status).toBe(200);
    expect(await refused()).toBe(9);
  });
});

describe("wrong keys from one address while the relay's database is locked (issue 25, item 1)", () => {
  let fx: RelayDbFixture;
  let h: Harness;
  const logs = capturedLog();
  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    // Two lookups in flight per address; three requests may wait for them on this replica.
    const file = { auth: { failuresPerAddress: 2, failureWindowSeconds: 60, unknownKeyLookupsPerSecond: 0, unknownKeyLookupBurst: 3 }, relayDb: { queryTimeoutMs: 20_000 } };
    h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: fx.dsn }, file, log: logs.log });
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it('wait for its lookups in flight up to unknownKeyLookupBurst; past it, 503 lookup_queue_full at once with Retry-After; once the lookups find nothing, the waiters get the 401', async () => {
    const waiting = metricReader(h, 'sluice_key_lookups_waiting');
    const refused = metricReader(h, 'sluice_key_lookups_refused_total', { reason: 'lookup_queue_full' });
    const agent = from('127.0.2.1');
    const lock = await lockTokens(fx);
    let answers: Promise<RawResponse>[];
    try {
      // Two lookups start and hang on the lock; the next three wait for a place among them.
      answers = Array.from({ length: 5 }, () => chat(h.url, wrongKey(), { agent }));
      await eventually(async () => expect(await waiting()).toBe(3), { timeoutMs: 15_000, what: 'three requests waiting for the address' });
      // The queue is full: refused at once, while the lock still holds (queued, they would hang).
      const past = await within(5000, Promise.all([chat(h.url, wrongKey(), { agent }), chat(h.url, wrongKey(), { agent })]));
      expect(past, 'answered while the lock holds').not.toBeNull();
      for (const a of past ?? []) {
        expect(a.status).toBe(503);
        expect(a.headers['retry-after']).toBe('1');
        expect((JSON.parse(a.text) as { error: { code: string } }).error.code).toBe('store_unavailable');
      }
      expect(await refused()).toBe(2);
    } finally {
      await lock.release();
    }
    // The two lookups find nothing and spend the address's budget: every waiter gets the contract's 401.
    for (const a of await Promise.all(answers)) expectContract401(a);
    expect(await waiting()).toBe(0);
    const lines = logs.lines.filter((l) => l.msg === 'request' && l.ip === '127.0.2.1');
    expect(lines.filter((l) => l.reason === 'lookup_queue_full').map((l) => [l.decision, l.status])).toEqual([
      ['store_unavailable', 503],
      ['store_unavailable', 503],
    ]);
    expect(lines.filter((l) => l.status === 401)).toHaveLength(5);
  });
});

describe('valid-key suffix variants, keys in the relay database in PostgreSQL (issue 25, item 2)', () => {
  let fx: RelayDbFixture;
  let h: Harness;
  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    // A small key cache, so that filling it would show within a test. Lookups are the question
    // here, so pinned calls are not counted as free (freeTier.pinnedChannels).
    h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: fx.dsn }, auth: { maxEntries: 20 }, file: { freeTier: { pinnedChannels: [] } } });
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it("are cached and looked up as the one key the relay looks up: no lookup per variant, no other user's key evicted, the suffix forwarded as sent", async () => {
    const lookups = metricReader(h, 'sluice_relay_db_seconds_count', { op: 'lookup' });
    const attacker = (await fx.addToken(await fx.addUser())).key;
    const other = (await fx.addToken(await fx.addUser())).key;
    expect((await chat(h.url, `sk-${other}`, { agent: from('127.0.0.3') })).status).toBe(200);
    expect((await chat(h.url, `sk-${attacker}`, { agent: from('127.0.0.2') })).status).toBe(200);
    const before = await lookups();
    h.relay.reset();

    const variants = Array.from({ length: 100 }, () => `sk-${attacker}-${consoleKey().slice(0, 12)}`);
    for (let i = 0; i < variants.length; i += 10) {
      const answers = await Promise.all(variants.slice(i, i + 10).map((k) => chat(h.url, k, { agent: from('127.0.0.2') })));
      // sluice lets each through; the relay itself refuses a channel a non-administrator asks for (new-api's 403).
      for (const a of answers) expect(a.status).toBe(403);
    }
    expect(await lookups()).toBe(before);
    // The relay got every variant exactly as sent, and looked up the key before the suffix.
    expect(h.relay.requests.map((r) => r.key).sort()).toEqual([...variants].sort());
    expect(h.relay.requests.every((r) => r.tokenKey === attacker && r.channel !== null)).toBe(true);

    // The other user's key is still cached: no lookup for it.
    expect((await chat(h.url, `sk-${other}`, { agent: from('127.0.0.3') })).status).toBe(200);
    expect(await lookups()).toBe(before);
    // An empty key before the "-" is no key at all (the relay: 401): no lookup either.
    expectContract401(await chat(h.url, `sk--${attacker}`, { agent: from('127.0.0.4') }));
    expect(await lookups()).toBe(before);
  });
});

describe("valid-key suffix variants, keys in sluice's registry in Redis (issue 25, item 2)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ store: 'redis', file: { freeTier: { pinnedChannels: [] } } });
  });
  afterAll(() => h?.close());

  it('mean what they mean to the relay: the key before the suffix, one lookup for all of them, the suffix forwarded as sent', async () => {
    const lookups = metricReader(h, 'sluice_store_seconds_count', { op: 'find_key' });
    const { key } = await h.createKey('suffixed');
    const before = await lookups();
    const variants = Array.from({ length: 30 }, (_, i) => `${key}-${i}`);
    for (const k of variants) expect((await chat(h.url, k, { agent: from('127.0.0.2') })).status).toBe(403);
    expect((await lookups()) - before).toBe(1);
    expect(h.relay.requests.map((r) => r.headers.authorization)).toEqual(variants.map((k) => `Bearer ${k}`));
  });
});
