/**
 * Hostile traffic, round two (issue 25, items 1 and 2): a client sending random keys, or a valid
 * key with a random `-<suffix>` each time, must not cost the relay's database a statement per
 * request. sluice runs as its own process in front of a relay whose keys are in PostgreSQL; one
 * address floods over real sockets while another calls with valid keys. Statements are counted by
 * the server (pg_stat_database: each lookup is one transaction), latency by the legitimate client.
 */
import http from 'node:http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';
import { createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { startChildSluice, type ChildSluice } from '../support/child-sluice.js';
import { runFlood } from './flood.js';
import { sleep } from '../support/time.js';

const FLOOD_MS = 5000;

/** Transactions the server has counted for one database (every lookup statement is one). */
async function transactions(db: string): Promise<number> {
  const c = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await c.connect();
  try {
    await c.query('SELECT pg_stat_clear_snapshot()');
    const r = await c.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [db]);
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

/** The count once it has stopped moving (backends report what they counted when they exit). */
async function settledTransactions(db: string): Promise<number> {
  let last = await transactions(db);
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const n = await transactions(db);
    if (n === last) return n;
    last = n;
  }
  return last;
}

/** One chat call with `key` on a keep-alive agent; resolves with its status and how long it took. */
function call(port: number, agent: http.Agent, key: string): Promise<{ status: number; ms: number }> {
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  const start = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - start }));
        res.on('error', () => resolve({ status: 0, ms: performance.now() - start }));
      },
    );
    req.on('error', () => resolve({ status: 0, ms: performance.now() - start }));
    req.end(body);
  });
}

/** Calls with valid keys, two at a time from one address, until `until()` says stop; their statuses and times. */
async function legitimateCalls(port: number, agent: http.Agent, keys: readonly string[], until: () => boolean): Promise<{ statuses: number[]; ms: number[] }> {
  const out = { statuses: [] as number[], ms: [] as number[] };
  await Promise.all(
    [0, 1].map(async (lane) => {
      for (let i = lane; !until(); i += 2) {
        const r = await call(port, agent, keys[i % keys.length]!);
        out.ms.push(r.ms);
        out.statuses.push(r.status);
        await sleep(5);
      }
    }),
  );
  return out;
}

function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

describe('a random-key flood from one address, in front of a relay whose keys are in PostgreSQL (sluice as its own process)', () => {
  let relay: RelayStandin;
  let fx: RelayDbFixture;
  let child: ChildSluice;
  let db: string;
  const keys: string[] = [];

  beforeAll(async () => {
    relay = await startRelayStandin({ quiet: true, maxRecorded: 10 });
    fx = await createRelayDb('postgres');
    db = new URL(fx.dsn).pathname.slice(1);
    for (let i = 0; i < 4; i++) keys.push(`sk-${(await fx.addToken(await fx.addUser())).key}`);
    child = await startChildSluice({ relayUrl: relay.url, env: { SLUICE_RELAY_DB: fx.dsn } });
  });
  afterAll(async () => {
    await child?.close();
    await relay?.close();
    await fx?.drop();
  });

  it("costs the database at most 20 statements a second, answers every flood request (the contract's 401, or 503 with Retry-After: none hangs), and keeps valid keys from another address under 100 ms at p99", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 2, localAddress: '127.0.0.3' });
    for (const k of keys) expect((await call(child.port, agent, k)).status).toBe(200);
    // The same calls for a second without the flood: what this machine gives them now (it may be loaded).
    const quietUntil = performance.now() + 1000;
    const quiet = await legitimateCalls(child.port, agent, keys, () => performance.now() > quietUntil);
    const before = await transactions(db);

    let flooding = true;
    const legitimate = legitimateCalls(child.port, agent, keys, () => !flooding);
    const flood = await runFlood({ port: child.port, from: '127.0.0.2', connections: 16, durationMs: FLOOD_MS, keys: 'random' });
    flooding = false;
    const { statuses, ms: latencies } = await legitimate;
    agent.destroy();
    // Its connections end with it, and each backend reports what it counted as it exits.
    await child.close();
    const statements = (await settledTransactions(db)) - before;
    const perSecond = statements / (FLOOD_MS / 1000);
    const p99 = percentile(latencies, 99);
    const quietP99 = percentile(quiet.ms, 99);
    const answered = Object.values(flood.statuses).reduce((a, b) => a + b, 0);
    console.info(
      `[hostile key flood] ${flood.sent} random keys in ${FLOOD_MS / 1000} s (${Math.round(flood.sent / (FLOOD_MS / 1000))}/s), statuses ${JSON.stringify(flood.statuses)}, slowest ${flood.maxMs.toFixed(0)} ms; ` +
        `${statements} statements (${perSecond.toFixed(1)}/s); valid keys: ${latencies.length} calls, p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms ` +
        `(without the flood: p50 ${percentile(quiet.ms, 50).toFixed(1)} ms, p99 ${quietP99.toFixed(1)} ms)`,
    );

    expect(answered).toBe(flood.sent);
    // Every flood request was answered: the contract's 401, or 503 with Retry-After; nothing hung or was forwarded.
    expect(flood.statuses['0']).toBeUndefined();
    expect((flood.statuses['401'] ?? 0) + (flood.statuses['503'] ?? 0)).toBe(flood.sent);
    expect(flood.contract401).toBe(flood.statuses['401'] ?? 0);
    expect(flood.retryAfter503).toBe(flood.statuses['503'] ?? 0);
    expect(flood.sent).toBeGreaterThan(1000);
    expect(perSecond).toBeLessThanOrEqual(20);
    expect([...quiet.statuses, ...statuses].every((s) => s === 200)).toBe(true);
    expect(latencies.length).toBeGreaterThan(50);
    // Under 100 ms; on a machine so loaded that the calls are slower than that without any flood,
    // the flood must at least not make them more than twice as slow. A key starved by the flood
    // (waiting behind its lookups or its database statements) waits seconds; with both cores
    // saturated, or three other test files running beside this one in CI, unstarved keys
    // measured 36-75 ms at p99, at 878dc90 as after it.
    expect(p99).toBeLessThan(Math.max(100, 2 * quietP99));
  });
});

describe('a valid key with a random suffix each time, from one address, in front of a relay whose keys are in PostgreSQL (sluice as its own process)', () => {
  const SUFFIX_FLOOD_MS = 3000;
  let relay: RelayStandin;
  let fx: RelayDbFixture;
  let child: ChildSluice;
  let db: string;
  let key: string;

  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    db = new URL(fx.dsn).pathname.slice(1);
    key = (await fx.addToken(await fx.addUser())).key;
    // An administrator's token: the relay gives it the channel its suffix asks for.
    relay = await startRelayStandin({ quiet: true, maxRecorded: 10, adminKeys: [key] });
    // Lookups are the question here, so pinned calls are not counted as free (freeTier.pinnedChannels).
    child = await startChildSluice({ relayUrl: relay.url, env: { SLUICE_RELAY_DB: fx.dsn }, config: { freeTier: { pinnedChannels: [] } } });
  });
  afterAll(async () => {
    await child?.close();
    await relay?.close();
    await fx?.drop();
  });

  it('costs the database no statement per variant: they are the one key the relay looks up, and each reaches the relay as sent', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1, localAddress: '127.0.0.3' });
    expect((await call(child.port, agent, `sk-${key}`)).status).toBe(200);
    agent.destroy();
    const before = await transactions(db);
    const flood = await runFlood({ port: child.port, from: '127.0.0.2', connections: 16, durationMs: SUFFIX_FLOOD_MS, keys: { suffixed: `sk-${key}` } });
    await child.close();
    const statements = (await settledTransactions(db)) - before;
    console.info(
      `[hostile suffix flood] ${flood.sent} variants of one valid key in ${SUFFIX_FLOOD_MS / 1000} s (${Math.round(flood.sent / (SUFFIX_FLOOD_MS / 1000))}/s), statuses ${JSON.stringify(flood.statuses)}; ${statements} statements`,
    );
    expect(flood.sent).toBeGreaterThan(500);
    expect(flood.statuses).toEqual({ 200: flood.sent });
    expect(relay.requests.at(-1)!.key).toMatch(new RegExp(`^sk-${key}-[0-9A-Za-z]{12}$`));
    expect(relay.requests.at(-1)).toMatchObject({ tokenKey: key, channel: expect.stringMatching(/^[0-9A-Za-z]{12}$/) });
    // The warm-up's own lookup may land in the count; a lookup per variant would be thousands.
    expect(statements).toBeLessThanOrEqual(3);
  });
});
