/**
 * The relay's database as a key source, against real PostgreSQL, MariaDB and SQLite files with
 * the tables created as the relay's ORM creates them (new-api and one-api, and new-api's older
 * char(48) key on PostgreSQL): every validity rule, the case-insensitive collation trap, hostile
 * keys, and the bounded number of statements.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { systemClock } from '../../src/runtime/clock.js';
import { parseRelayDsn } from '../../src/auth/relay-db/dsn.js';
import { openDriver, type RelayDbDriver } from '../../src/auth/relay-db/driver.js';
import type { SqliteDriver } from '../../src/auth/relay-db/sqlite.js';
import { RelayKeySource, RelayDbBusyError, type RelayKeySourceOptions } from '../../src/auth/relay-db/source.js';
import { hashKey } from '../../src/auth/keys.js';
import { consoleKey, createRelayDb, DIALECTS, type Dialect, type RelayDbFixture, type RelayFlavour } from '../support/relay-db.js';
import { sleep } from '../support/time.js';

const quiet = pino({ level: 'silent' });

/** A source's options over the fixture's database, as the tests here start from. */
function sourceOptions(fx: RelayDbFixture): RelayKeySourceOptions {
  return { dsn: parseRelayDsn(fx.dsn, 'SLUICE_RELAY_DB'), schema: null, poolSize: 2, queryTimeoutMs: 5000, maxAgeMs: 10_000, staleMs: 60_000, clock: systemClock, log: quiet };
}

/** A source over the fixture's database whose statements are counted. */
async function countedSource(fx: RelayDbFixture, over: Partial<RelayKeySourceOptions> = {}) {
  const dsn = parseRelayDsn(fx.dsn, 'SLUICE_RELAY_DB');
  const real = await openDriver(dsn, { poolSize: 2, queryTimeoutMs: 5000 });
  const statements: string[] = [];
  const params: unknown[][] = [];
  const driver: RelayDbDriver = {
    dialect: real.dialect,
    query: (s) => (statements.push(s.sql), params.push(s.params), real.query(s)),
    close: () => real.close(),
  };
  const source = new RelayKeySource({ ...sourceOptions(fx), driver, ...over });
  return { source, statements, params, real, lookups: () => statements.filter((s) => s.includes('FROM tokens')).length };
}

const find = (s: RelayKeySource, key: string, background = false) => s.find(key, hashKey(key), background);

const CASES: Array<[Dialect, RelayFlavour]> = [
  ...DIALECTS.map((d): [Dialect, RelayFlavour] => [d, 'new-api']),
  ...DIALECTS.map((d): [Dialect, RelayFlavour] => [d, 'one-api']),
  ['postgres', 'new-api-char48'],
];

describe.each(CASES)('relay keys on %s (%s schema)', (dialect, flavour) => {
  let fx: RelayDbFixture;
  let src: Awaited<ReturnType<typeof countedSource>>;
  let user: number;
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    fx = await createRelayDb(dialect, flavour);
    src = await countedSource(fx);
    user = await fx.addUser();
  });
  afterAll(async () => {
    await src?.source.close();
    await fx?.drop();
  });

  it('finds a console token by its key, with or without sk- and with a -<channel> suffix, as the relay user and token id', async () => {
    const t = await fx.addToken(user);
    for (const presented of [`sk-${t.key}`, t.key, `sk-${t.key}-2`]) {
      expect(await find(src.source, presented)).toEqual({ id: String(t.id), user: String(user), hash: hashKey(presented) });
    }
    expect(src.source.health()).toMatchObject({ state: 'ok', schema: flavour === 'one-api' ? 'one-api' : 'new-api' });
  });

  it('refuses a token that is disabled, expired or out of quota, as the relay does', async () => {
    const disabled = await fx.addToken(user, { status: 2 });
    const expiredStatus = await fx.addToken(user, { status: 3 });
    const exhaustedStatus = await fx.addToken(user, { status: 4 });
    const expired = await fx.addToken(user, { expired_time: now() - 10 });
    const noQuota = await fx.addToken(user, { remain_quota: 0 });
    const reasons = ['key_disabled', 'key_disabled', 'key_disabled', 'key_expired', 'key_exhausted'];
    for (const [i, t] of [disabled, expiredStatus, exhaustedStatus, expired, noQuota].entries()) {
      expect(await find(src.source, `sk-${t.key}`)).toEqual({ reason: reasons[i], id: String(t.id), user: String(user) });
    }
  });

  it('refuses a NULL expiry or quota as the relay reads them (Go: 0), and admits a NULL quota of an unlimited token', async () => {
    const noExpiry = await fx.addToken(user);
    const noQuota = await fx.addToken(user);
    const unlimited = await fx.addToken(user, { unlimited_quota: true });
    await fx.exec('UPDATE tokens SET expired_time = NULL WHERE id = ?', [noExpiry.id]);
    await fx.exec('UPDATE tokens SET remain_quota = NULL WHERE id = ?', [noQuota.id]);
    await fx.exec('UPDATE tokens SET remain_quota = NULL WHERE id = ?', [unlimited.id]);
    expect(await find(src.source, `sk-${noExpiry.key}`)).toEqual({ reason: 'key_expired', id: String(noExpiry.id), user: String(user) });
    expect(await find(src.source, `sk-${noQuota.key}`)).toEqual({ reason: 'key_exhausted', id: String(noQuota.id), user: String(user) });
    expect(await find(src.source, `sk-${unlimited.key}`)).toMatchObject({ id: String(unlimited.id), user: String(user) });
  });

  it('keeps 64-bit user ids past 2^53 apart: two users, two identities', async () => {
    const ids = ['9007199254740992', '9007199254740993'];
    // Both users made first: a new row's id would follow the first large one.
    const users = [await fx.addUser(), await fx.addUser()];
    const found: unknown[] = [];
    for (const [i, id] of ids.entries()) {
      const t = await fx.addToken(user);
      await fx.exec('UPDATE users SET id = ? WHERE id = ?', [id, users[i]]);
      await fx.exec('UPDATE tokens SET user_id = ? WHERE id = ?', [id, t.id]);
      found.push(await find(src.source, `sk-${t.key}`));
    }
    expect(found.map((f) => (f as { user: string }).user)).toEqual(ids);
  });

  it('admits a token with a future expiry, and an unlimited one with no quota left', async () => {
    const future = await fx.addToken(user, { expired_time: now() + 3600 });
    const unlimited = await fx.addToken(user, { remain_quota: 0, unlimited_quota: true });
    for (const t of [future, unlimited]) expect(await find(src.source, `sk-${t.key}`)).toMatchObject({ id: String(t.id) });
  });

  it('does not accept a token deleted in the console', async () => {
    const t = await fx.addToken(user);
    await fx.deleteToken(t.id);
    // new-api keeps the row (deleted_at): held as deleted, so sluice's own registry is asked next;
    // one-api deletes the row.
    expect(await find(src.source, `sk-${t.key}`)).toEqual(flavour === 'one-api' ? 'unknown' : { reason: 'key_deleted', id: String(t.id), user: String(user) });
  });

  it('refuses the tokens of a user who is disabled, deleted or gone', async () => {
    const disabledUser = await fx.addUser({ status: 2 });
    const goneUser = await fx.addUser();
    const a = await fx.addToken(disabledUser);
    const b = await fx.addToken(goneUser);
    await fx.hardDeleteUser(goneUser);
    expect(await find(src.source, a.key)).toMatchObject({ reason: 'user_disabled', id: String(a.id), user: String(disabledUser) });
    expect(await find(src.source, b.key)).toMatchObject({ reason: 'user_missing', id: String(b.id), user: String(goneUser) });
    const deletedUser = await fx.addUser();
    const c = await fx.addToken(deletedUser);
    if (flavour === 'one-api') await fx.setUserStatus(deletedUser, 3);
    else await fx.softDeleteUser(deletedUser);
    expect(await find(src.source, c.key)).toMatchObject({ reason: flavour === 'one-api' ? 'user_disabled' : 'user_deleted', id: String(c.id) });
  });

  it('does not authenticate a key that differs only in case (MySQL collations compare without case)', async () => {
    const t = await fx.addToken(user, { key: consoleKey().replace(/^./, 'a') });
    const other = t.key.replace(/^a/, 'A');
    expect(await find(src.source, `sk-${other}`)).toBe('unknown');
    expect(await find(src.source, `sk-${t.key}`)).toMatchObject({ id: String(t.id) });
  });

  it('answers hostile keys (quotes, comments, NUL, 10 KB) as unknown without sending them, and a batch they share still finds the good key', async () => {
    const good = await fx.addToken(user);
    const before = src.lookups();
    const hostile = [`sk-'; DROP TABLE tokens; --`, "sk-x')OR/**/1=1#", `sk-a"b\`c'd`, 'sk-a\\', `sk-ab\0cd`, `sk-${'x'.repeat(10_240)}`, `sk-${'y'.repeat(129)}`, 'sk-%', 'sk-_'];
    const answers = await Promise.all([...hostile.map((k) => find(src.source, k)), find(src.source, `sk-${good.key}`)]);
    expect(answers.slice(0, -1)).toEqual(hostile.map(() => 'unknown'));
    expect(answers.at(-1)).toMatchObject({ id: String(good.id) });
    // One statement for all of them, carrying only the good key: nothing else reaches the database.
    expect(src.lookups() - before).toBe(1);
    expect(src.params.at(-1)).toEqual([good.key]);
    expect((await fx.exec('SELECT COUNT(*) AS n FROM tokens'))[0]!.n).toBeTruthy();
  });

  it('looks up many keys asked together in few statements: 1,100 keys, 3 statements of at most 500', async () => {
    const tokens = await Promise.all(Array.from({ length: 30 }, () => fx.addToken(user)));
    const keys = [...tokens.map((t) => t.key), ...Array.from({ length: 1070 }, () => consoleKey())];
    const before = src.lookups();
    const answers = await Promise.all(keys.map((k) => find(src.source, k)));
    expect(src.lookups() - before).toBe(3);
    expect(answers.filter((a) => typeof a === 'object')).toHaveLength(30);
  });
});

describe('relay keys: bounds', () => {
  let fx: RelayDbFixture;
  beforeAll(async () => {
    fx = await createRelayDb('postgres');
  });
  afterAll(() => fx?.drop());

  it('refuses a lookup at once when too many keys already wait, instead of queueing without bound', async () => {
    const { source, lookups } = await countedSource(fx, { maxQueued: 100, poolSize: 1 });
    try {
      const results = await Promise.allSettled(Array.from({ length: 400 }, () => find(source, consoleKey())));
      const busy = results.filter((r) => r.status === 'rejected' && r.reason instanceof RelayDbBusyError).length;
      expect(busy).toBe(300);
      expect(lookups()).toBe(1);
    } finally {
      await source.close();
    }
  });

  it('stays ok while a busy pool makes lookups wait out their bound but statements still succeed', async () => {
    // One connection, each statement 600 ms: a key that queues behind one waits longer than the
    // query timeout (500 ms) and its 250 ms grace, yet every statement answers. Busy, not down: the
    // health (readiness, sluice_relay_db_up) must not flap to failing on every such wait.
    const user = await fx.addUser();
    const tokens = await Promise.all(Array.from({ length: 4 }, () => fx.addToken(user)));
    const real = await openDriver(parseRelayDsn(fx.dsn, 'SLUICE_RELAY_DB'), { poolSize: 1, queryTimeoutMs: 5000 });
    const slow: RelayDbDriver = { dialect: real.dialect, query: async (s) => (await sleep(600), real.query(s)), close: () => real.close() };
    const busy = new RelayKeySource({ ...sourceOptions(fx), poolSize: 1, queryTimeoutMs: 500, driver: slow });
    try {
      await find(busy, tokens[0]!.key, true); // the schema read and a first statement (a renewal: no bound on its wait)
      await sleep(600); // the last success is now older than the query timeout
      const states = new Set<string>();
      const watch = setInterval(() => states.add(busy.health().state), 10);
      const first = find(busy, tokens[1]!.key);
      await sleep(20);
      const queued = await Promise.allSettled(tokens.slice(2).map((t) => find(busy, t.key)));
      await first;
      clearInterval(watch);
      // The keys behind the first statement waited out their bound...
      for (const r of queued) expect(r.status === 'rejected' && String(r.reason)).toMatch(/longer than|timed out/i);
      // ...while the database answered every statement: never reported failing.
      expect([...states]).toEqual(['ok']);
      expect(busy.health().state).toBe('ok');
    } finally {
      await busy.close();
    }
  });

  it('waits for company before renewing in the background, then sends the renewals together', async () => {
    const user = await fx.addUser();
    const tokens = await Promise.all(Array.from({ length: 5 }, () => fx.addToken(user)));
    const { source, lookups } = await countedSource(fx, { renewWindowMs: 200 });
    try {
      await find(source, tokens[0]!.key); // schema read, first statement
      const before = lookups();
      const renewals = tokens.map((t) => find(source, t.key, true));
      await sleep(50);
      expect(lookups() - before).toBe(0);
      expect(await Promise.all(renewals)).toHaveLength(5);
      expect(lookups() - before).toBe(1);
    } finally {
      await source.close();
    }
  });

  it('reports a database without the relay tables, and a forced schema that does not fit, as not usable', async () => {
    const empty = await createRelayDb('sqlite', 'one-api');
    try {
      await empty.exec('DROP TABLE tokens');
      const a = await countedSource(empty);
      await expect(find(a.source, consoleKey())).rejects.toThrow(/no "tokens" table/);
      expect(a.source.health()).toMatchObject({ state: 'starting', error: expect.stringMatching(/tokens/) });
      await a.source.close();
    } finally {
      await empty.drop();
    }
    const oneApi = await createRelayDb('sqlite', 'one-api');
    try {
      const b = await countedSource(oneApi, { schema: 'new-api' });
      await expect(find(b.source, consoleKey())).rejects.toThrow(/deleted_at/);
      await b.source.close();
    } finally {
      await oneApi.drop();
    }
  });

  it("waits for the relay's SQLite write lock off the event loop, and at most the query timeout", async () => {
    const lite = await createRelayDb('sqlite');
    const { source } = await countedSource(lite, { queryTimeoutMs: 400 });
    try {
      const t = await lite.addToken(await lite.addUser());
      expect(await find(source, t.key)).toMatchObject({ id: String(t.id) }); // schema read, file open
      await lite.exec('BEGIN EXCLUSIVE'); // the relay writing: readers must wait
      let ticks = 0;
      const timer = setInterval(() => ticks++, 10);
      const started = performance.now();
      const outcome = await find(source, consoleKey()).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      const waited = performance.now() - started;
      clearInterval(timer);
      await lite.exec('COMMIT');
      expect(outcome).toMatch(/locked|busy|took longer/i);
      expect(waited).toBeGreaterThanOrEqual(350);
      expect(waited).toBeLessThan(3000);
      // The event loop kept turning while the lookup waited (a blocked loop would tick about once).
      expect(ticks).toBeGreaterThan(10);
      expect(await find(source, t.key)).toMatchObject({ id: String(t.id) });
    } finally {
      await source.close();
      await lite.drop();
    }
  });

  it('starts a new SQLite reader thread when the last one died, instead of failing every lookup until restart', async () => {
    const lite = await createRelayDb('sqlite');
    const { source, real } = await countedSource(lite);
    try {
      const t = await lite.addToken(await lite.addUser());
      expect(await find(source, t.key)).toMatchObject({ id: String(t.id) });
      await (real as SqliteDriver).endWorker();
      const other = await lite.addToken(await lite.addUser());
      expect(await find(source, other.key)).toMatchObject({ id: String(other.id) });
    } finally {
      await source.close();
      await lite.drop();
    }
  });

  it('never sends a key crafted to escape MySQL quoting (NO_BACKSLASH_ESCAPES): it reads nothing and waits for nothing', async () => {
    // Under NO_BACKSLASH_ESCAPES a server reads mysql2's backslash escaping differently, and these
    // keys would read every row, or the relay's keys one character at a time by SLEEP timing. What
    // decides is that no such byte reaches the server: only the console's alphabet is ever sent.
    const my = await createRelayDb('mysql');
    const { source, params } = await countedSource(my);
    try {
      const t = await my.addToken(await my.addUser());
      const crafted = ["sk-x')OR/**/1=1#", "sk-x')OR/**/IF(SUBSTR((SELECT/**/`key`/**/FROM/**/tokens/**/LIMIT/**/1),1,1)=0x73,SLEEP(1),0)#"];
      const started = performance.now();
      const answers = await Promise.all([...crafted.map((k) => find(source, k)), find(source, t.key)]);
      expect(answers.slice(0, 2)).toEqual(['unknown', 'unknown']);
      expect(answers[2]).toMatchObject({ id: String(t.id) });
      expect(performance.now() - started).toBeLessThan(900);
      expect(params.flat().length).toBeGreaterThan(0);
      for (const v of params.flat()) expect(String(v)).toMatch(/^[0-9A-Za-z]+$/);
    } finally {
      await source.close();
      await my.drop();
    }
  });
});
