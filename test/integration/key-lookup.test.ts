/**
 * "Whose key is this?": `POST /admin/keys/lookup` with a key in the body answers which source
 * holds it, its id and user, and whether it works now or why not, without the key in any answer
 * or log line, and without filling or emptying the cache requests use. A running sluice with the
 * relay's keys in PostgreSQL and its own registry, real sockets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenFingerprint } from '../../src/admin/server.js';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { consoleKey, createRelayDb, type RelayDbFixture } from '../support/relay-db.js';

describe('POST /admin/keys/lookup', () => {
  const logs = capturedLog('debug');
  let fx: RelayDbFixture;
  let h: Harness;
  let user: number;
  const lookup = (body: unknown) =>
    fetch(`${h.adminUrl}/admin/keys/lookup`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const models = (key: string) => request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${key}` } });
  /** Every key the test looked up, to check none reached a log line. */
  const looked: string[] = [];
  const answerFor = async (key: string) => {
    looked.push(key);
    const r = await lookup({ key });
    expect(r.status).toBe(200);
    const text = await r.text();
    if (key.length > 3) expect(text).not.toContain(key.replace(/^sk-/, ''));
    return JSON.parse(text) as Record<string, unknown>;
  };

  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: fx.dsn }, log: logs.log });
    user = await fx.addUser();
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it("names a relay key's id and user, valid or why not, as requests would see it (sk- and a -suffix aside)", async () => {
    const ok = await fx.addToken(user);
    const off = await fx.addToken(user, { status: 2 });
    const gone = await fx.addToken(user);
    await fx.deleteToken(gone.id);
    expect(await answerFor(`sk-${ok.key}-7`)).toEqual({ id: String(ok.id), user: String(user), source: 'relay-db', valid: true, reason: null });
    expect(await answerFor(ok.key)).toMatchObject({ id: String(ok.id), valid: true });
    expect(await answerFor(`sk-${off.key}`)).toEqual({ id: String(off.id), user: String(user), source: 'relay-db', valid: false, reason: 'key_disabled' });
    expect(await answerFor(`sk-${gone.key}`)).toEqual({ id: String(gone.id), user: String(user), source: 'relay-db', valid: false, reason: 'key_deleted' });
  });

  it("names a key of sluice's registry, and says when no source knows a key", async () => {
    const k = await h.createKey('registry-user');
    expect(await answerFor(k.key)).toEqual({ id: k.id, user: 'registry-user', source: 'registry', valid: true, reason: null });
    expect(await answerFor(`sk-${consoleKey()}`)).toEqual({ id: null, user: null, source: null, valid: false, reason: 'unknown_key' });
    expect(await answerFor('sk-')).toEqual({ id: null, user: null, source: null, valid: false, reason: 'empty_key' });
  });

  it('neither fills nor empties the cache requests use', async () => {
    // Looked up while unknown, then made in the console: the first request works (nothing cached it as unknown).
    const body = consoleKey();
    expect(await answerFor(`sk-${body}`)).toMatchObject({ valid: false, reason: 'unknown_key' });
    await fx.addToken(user, { key: body });
    expect((await models(`sk-${body}`)).status).toBe(200);
    // Disabled in the console while cached: the lookup tells the truth, and the cached answer
    // serves requests until it is due (relayDb.recheckSeconds) as it would have without the lookup.
    const t = await fx.addToken(user);
    expect((await models(`sk-${t.key}`)).status).toBe(200);
    await fx.setToken(t.id, { status: 2 });
    expect(await answerFor(`sk-${t.key}`)).toMatchObject({ valid: false, reason: 'key_disabled' });
    expect((await models(`sk-${t.key}`)).status).toBe(200);
  });

  it('refuses a body that is not {"key": "..."} with 400, never repeating the key', async () => {
    const secret = `sk-${consoleKey()}`;
    looked.push(secret);
    const cases: Array<[unknown, string]> = [
      ['not json', 'invalid_json'],
      [{}, 'invalid_body'],
      [{ key: 5 }, 'invalid_body'],
      [[secret], 'invalid_body'],
      [{ key: secret, user: 'x' }, 'unknown_field'],
      [{ key: 'x'.repeat(2000) }, 'invalid_body'],
    ];
    for (const [body, code] of cases) {
      const r = await lookup(body);
      const text = await r.text();
      expect(r.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(JSON.parse(text).error.code).toBe(code);
      expect(text).not.toContain(secret.slice(3));
    }
    // Only in a POST body: not a GET, not in the path.
    expect((await fetch(`${h.adminUrl}/admin/keys/lookup?key=${secret}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(404);
  });

  it('logs each lookup as an admin action with its answer and the token fingerprint, and no key anywhere', async () => {
    const t = await fx.addToken(user);
    await answerFor(`sk-${t.key}`);
    const line = logs.lines.filter((l) => l.action === 'keys.lookup').at(-1);
    expect(line).toMatchObject({
      msg: 'admin action',
      level: 30,
      admin: tokenFingerprint(ADMIN_TOKEN),
      keyId: String(t.id),
      user: String(user),
      source: 'relay-db',
      valid: true,
      status: 200,
    });
    const text = logs.text();
    for (const key of looked.filter((k) => k.length > 3)) expect(text).not.toContain(key.replace(/^sk-/, '').replace(/-7$/, ''));
    expect(text).not.toContain(ADMIN_TOKEN);
  });
});
