/**
 * "Why 401": every cause of the contract's 401 has its access line say why (`reason`), with the
 * key's id and user when a key source holds the key, from a lookup and from the cache alike, while
 * the client gets exactly the contract's body, with no hint. A running sluice over real sockets,
 * with keys in sluice's registry and in the relay's own database (PostgreSQL, MariaDB, SQLite).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { expectContract401, metricReader } from '../support/helpers.js';
import { request, type RawResponse } from '../support/http.js';
import { capturedLog, type CapturedLog } from '../support/log.js';
import { eventually } from '../support/time.js';
import { consoleKey, createRelayDb, DIALECTS, type RelayDbFixture } from '../support/relay-db.js';

/** The contract's 401, byte for byte but for the request id; the reason is nowhere in it. */
function expectContract401Without(r: RawResponse, reason: string): void {
  expectContract401(r);
  expect(r.text).not.toContain(reason);
}

/** Sends one request and returns its access line, after checking the client saw the contract's 401. */
async function refused(h: Harness, logs: CapturedLog, path: string, headers: OutgoingHttpHeaders, reason: string): Promise<Record<string, unknown>> {
  const method = path === '/v1/models' ? 'GET' : 'POST';
  const r = await request(h.url, method, path, { headers, body: method === 'POST' ? '{"model":"vend-flash","messages":[]}' : undefined });
  expectContract401Without(r, reason);
  // The access line is built at the end of sluice's turn, which may come after the client has read the answer.
  return eventually(() => logs.requests().find((l) => l.reqId === r.headers['x-oneapi-request-id']) ?? false, {
    what: `the access line of ${path} ${JSON.stringify(headers)}`,
    timeoutMs: 2_000,
  });
}

describe("why 401, keys in sluice's registry", () => {
  const logs = capturedLog();
  let h: Harness;
  let alice: string;
  let bob: string;
  beforeAll(async () => {
    h = await startHarness({ store: 'memory', log: logs.log });
    alice = (await h.createKey('alice')).key;
    bob = (await h.createKey('bob')).key;
  });
  afterAll(() => h?.close());

  // Header values as Node sends them: a list is one line per value.
  type Headers = Record<string, string | string[]>;
  const cases: Array<[string, string, Headers, string]> = [
    ['no key header at all', '/v1/chat/completions', {}, 'no_key'],
    ['x-api-key where only Authorization counts', '/v1/chat/completions', { 'x-api-key': 'KEY' }, 'wrong_header'],
    ['x-goog-api-key on the messages protocol', '/v1/messages', { 'x-goog-api-key': 'KEY' }, 'wrong_header'],
    ['two Authorization lines', '/v1/chat/completions', { authorization: ['Bearer KEY', 'Bearer KEY'] }, 'repeated_header'],
    ['two x-api-key lines', '/v1/messages', { 'x-api-key': ['KEY', 'KEY'] }, 'repeated_header'],
    ['Authorization without Bearer', '/v1/chat/completions', { authorization: 'Basic KEY' }, 'not_bearer'],
    ['Bearer alone', '/v1/chat/completions', { authorization: 'Bearer' }, 'empty_key'],
    ['sk- alone', '/v1/chat/completions', { authorization: 'Bearer sk-' }, 'empty_key'],
    ['a channel suffix with no key before it', '/v1/chat/completions', { authorization: 'Bearer sk--7' }, 'empty_key'],
    ['an empty x-api-key beside a valid Authorization', '/v1/messages', { authorization: 'Bearer KEY', 'x-api-key': '' }, 'empty_key'],
    ['a wrong key', '/v1/chat/completions', { authorization: 'Bearer sk-wrongwrongwrongwrong0123' }, 'unknown_key'],
    ['a wrong key beside a valid one', '/v1/models', { authorization: 'Bearer KEY', 'x-api-key': 'sk-wrongwrongwrongwrong0123' }, 'unknown_key'],
  ];
  it.each(cases)('%s: %s', async (_what, path, headers, reason) => {
    // KEY is alice's valid key: the refusal is for the other header's fault, never the valid key's.
    const withKey = JSON.parse(JSON.stringify(headers).replaceAll('KEY', alice.slice(3))) as OutgoingHttpHeaders;
    const line = await refused(h, logs, path, withKey, reason);
    expect(line).toMatchObject({ decision: 'unauthorized', status: 401, reason });
    expect(line.user).toBeUndefined();
    expect(line.keyId).toBeUndefined();
  });

  it("keys of two users: the reason and the first key's user and id", async () => {
    const line = await refused(h, logs, '/v1/messages', { authorization: `Bearer ${alice}`, 'x-api-key': bob }, 'two_users');
    expect(line).toMatchObject({ reason: 'two_users', user: 'alice', keyId: expect.stringMatching(/^key_/) });
  });

  it('a key deleted from the registry is unknown from then on, from the cache too', async () => {
    const k = await h.createKey('carol');
    expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer ${k.key}` } })).status).toBe(200);
    // An admitted call's line names its user, and carries no reason.
    const admitted = await eventually(() => logs.requests().find((l) => l.user === 'carol') ?? false, { what: "carol's access line" });
    expect(admitted).toMatchObject({ decision: 'admitted', user: 'carol', status: 200 });
    expect(admitted.reason).toBeUndefined();
    await fetch(`${h.adminUrl}/admin/keys/${k.id}`, { method: 'DELETE', headers: { authorization: 'Bearer test-admin-token-0123456789' } });
    for (let i = 0; i < 2; i++) {
      expect(await refused(h, logs, '/v1/models', { authorization: `Bearer ${k.key}` }, 'unknown_key')).toMatchObject({ reason: 'unknown_key' });
    }
  });
});

describe.each(DIALECTS)("why 401, keys in the relay's %s database", (dialect) => {
  const logs = capturedLog();
  let fx: RelayDbFixture;
  let h: Harness;
  let user: number;
  const now = (): number => Math.floor(Date.now() / 1000);
  beforeAll(async () => {
    fx = await createRelayDb(dialect);
    // A console change is seen within 1 s (relayDb.recheckSeconds).
    h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: fx.dsn }, file: { relayDb: { recheckSeconds: 1 } }, log: logs.log });
    user = await fx.addUser();
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it('says why the relay would refuse each key, and whose it is, from the database and then from the cache', async () => {
    const lookups = metricReader(h, 'sluice_relay_db_seconds_count', { op: 'lookup' });
    const disabledUser = await fx.addUser({ status: 2 });
    const softDeletedUser = await fx.addUser();
    const goneUser = await fx.addUser();
    const cases: Array<[string, { id: number; key: string }, number]> = [
      ['key_disabled', await fx.addToken(user, { status: 2 }), user],
      ['key_expired', await fx.addToken(user, { expired_time: now() - 60 }), user],
      ['key_exhausted', await fx.addToken(user, { remain_quota: 0 }), user],
      ['user_disabled', await fx.addToken(disabledUser), disabledUser],
      ['user_deleted', await fx.addToken(softDeletedUser), softDeletedUser],
      ['user_missing', await fx.addToken(goneUser), goneUser],
    ];
    await fx.softDeleteUser(softDeletedUser);
    await fx.hardDeleteUser(goneUser);
    for (const [reason, t, owner] of cases) {
      const before = await lookups();
      for (let i = 0; i < 2; i++) {
        const line = await refused(h, logs, '/v1/chat/completions', { authorization: `Bearer sk-${t.key}` }, reason);
        expect(line, `${reason}, call ${i + 1}`).toMatchObject({ decision: 'unauthorized', reason, user: String(owner), keyId: String(t.id) });
      }
      // The second answer came from the cache: it still said why.
      expect((await lookups()) - before, reason).toBe(1);
    }
  });

  it('says a key deleted in the console was deleted, and whose it was', async () => {
    const t = await fx.addToken(user);
    expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer sk-${t.key}` } })).status).toBe(200);
    await fx.deleteToken(t.id);
    // Once the cached answer is past relayDb.recheckSeconds.
    const expect401 = async (): Promise<Record<string, unknown> | null> => {
      const r = await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer sk-${t.key}` } });
      if (r.status !== 401) return null;
      return eventually(() => logs.requests().find((l) => l.reqId === r.headers['x-oneapi-request-id']) ?? false, { what: 'the 401’s access line', timeoutMs: 2_000 });
    };
    const line = await eventually(async () => (await expect401()) ?? false, { timeoutMs: 5_000, intervalMs: 250, what: 'the deleted key answered 401' });
    expect(line).toMatchObject({ reason: fx.flavour === 'new-api' ? 'key_deleted' : 'unknown_key' });
    if (fx.flavour === 'new-api') expect(line).toMatchObject({ user: String(user), keyId: String(t.id) });
  });

  it('a key no source knows is unknown', async () => {
    const line = await refused(h, logs, '/v1/chat/completions', { authorization: `Bearer sk-${consoleKey()}` }, 'unknown_key');
    expect(line).toMatchObject({ reason: 'unknown_key' });
    expect(line.user).toBeUndefined();
  });
});
