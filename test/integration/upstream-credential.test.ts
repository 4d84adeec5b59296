/**
 * `upstream.credential` stands in only for keys of sluice's own registry, which the relay does not
 * know. A key from the relay's database is the relay's own token: it reaches the relay as the
 * client sent it, so the relay's per-user quota, billing and logs stay with that token. Real
 * sockets, a real relay database (PostgreSQL), the relay stand-in checking tokens against that
 * database as new-api's TokenAuth does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { startRelayStandin, type RelayStandin } from '../../demo/relay.js';

describe('upstream.credential beside keys from the relay database', () => {
  let fx: RelayDbFixture;
  let relay: RelayStandin;
  let h: Harness;
  /** A token of the relay's console, used as the credential for registry keys. */
  let credential: { id: number; key: string };

  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    // The relay knows exactly the tokens of its database, as new-api does.
    relay = await startRelayStandin({
      quiet: true,
      tokens: async (token) => (await fx.exec('SELECT 1 FROM tokens WHERE "key" = ? AND deleted_at IS NULL', [token])).length === 1,
    });
    credential = await fx.addToken(await fx.addUser());
    h = await startHarness({ store: 'redis', relay, env: { SLUICE_RELAY_DB: fx.dsn, SLUICE_UPSTREAM_CREDENTIAL: `sk-${credential.key}` } });
  });
  afterAll(async () => {
    await h?.close();
    await relay?.close();
    await fx?.drop();
  });

  it('a key from the relay database reaches the relay as the client sent it, in every header it sent, never as the credential', async () => {
    const t = await fx.addToken(await fx.addUser());
    for (const authorization of [`Bearer sk-${t.key}`, `Bearer ${t.key}`]) {
      const r = await request(h.url, 'GET', '/v1/models', { headers: { authorization } });
      expect(r.status, r.text).toBe(200);
      const seen = relay.requests.at(-1)!;
      expect(seen.headers.authorization).toBe(authorization);
      expect(seen.key).toBe(authorization.slice('Bearer '.length));
    }
    // The messages protocol's header too: the relay reads x-api-key there, and bills the token in it.
    const r = await request(h.url, 'POST', '/v1/messages', {
      headers: { 'x-api-key': `sk-${t.key}`, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vend-flash', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(r.status, r.text).toBe(200);
    const seen = relay.requests.at(-1)!;
    expect(seen.headers['x-api-key']).toBe(`sk-${t.key}`);
    expect(seen.key).toBe(`sk-${t.key}`);
    expect(relay.requests.some((q) => q.key.includes(credential.key))).toBe(false);
  });

  it("a key of sluice's registry is replaced by the credential, so a relay that knows only its own tokens answers 200", async () => {
    const { key } = await h.createKey('alice');
    const r = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } });
    expect(r.status, r.text).toBe(200);
    expect(relay.requests.at(-1)!.headers.authorization).toBe(`Bearer sk-${credential.key}`);
    const m = await request(h.url, 'POST', '/v1/messages', {
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vend-flash', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(m.status, m.text).toBe(200);
    expect(relay.requests.at(-1)!.headers['x-api-key']).toBe(`sk-${credential.key}`);
  });
});

describe('no upstream.credential: a registry key reaches the relay as itself', () => {
  let fx: RelayDbFixture;
  let relay: RelayStandin;
  let h: Harness;

  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    relay = await startRelayStandin({
      quiet: true,
      tokens: async (token) => (await fx.exec('SELECT 1 FROM tokens WHERE "key" = ? AND deleted_at IS NULL', [token])).length === 1,
    });
    h = await startHarness({ store: 'redis', relay, env: { SLUICE_RELAY_DB: fx.dsn } });
  });
  afterAll(async () => {
    await h?.close();
    await relay?.close();
    await fx?.drop();
  });

  it('a stock relay refuses a registry key it never issued (401 from the relay), and accepts its own token through sluice', async () => {
    const { key } = await h.createKey('bob');
    const refused = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } });
    expect(refused.status).toBe(401);
    expect(relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${key}`);
    const t = await fx.addToken(await fx.addUser());
    const ok = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer sk-${t.key}` } });
    expect(ok.status, ok.text).toBe(200);
  });
});
