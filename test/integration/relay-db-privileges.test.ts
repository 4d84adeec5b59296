/**
 * A relay database user without SELECT on `tokens` or `users` (or on a column the lookups read)
 * is told which privilege is missing and how to grant it, in the readiness check and the log,
 * instead of being asked whether this is the relay's main database. Real PostgreSQL and MariaDB,
 * with a user of the test's own made and dropped here.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { request } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { createRelayDb, mysqlAdmin, type RelayDbFixture } from '../support/relay-db.js';
import { eventually } from '../support/time.js';

interface Grants {
  /** A DSN of the fixture's database as `user`, who holds only what `grant` gave. */
  dsnAs(user: string): string;
  createUser(user: string, grants: string[]): Promise<void>;
  dropUsers(): Promise<void>;
}

const PASSWORD = `pw${randomBytes(6).toString('hex')}`;

function postgresGrants(fx: RelayDbFixture): Grants {
  const made: string[] = [];
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const u = new URL(fx.dsn);
    u.username = new URL(inject('pgAdminUrl')).username;
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  return {
    dsnAs(user) {
      const u = new URL(fx.dsn);
      u.username = user;
      u.password = PASSWORD;
      return u.toString();
    },
    async createUser(user, grants) {
      made.push(user);
      await admin(async (c) => {
        await c.query(`CREATE ROLE "${user}" LOGIN PASSWORD '${PASSWORD}'`);
        for (const g of grants) await c.query(`GRANT ${g} TO "${user}"`);
      });
    },
    async dropUsers() {
      await admin(async (c) => {
        for (const user of made) {
          await c.query(`DROP OWNED BY "${user}"`);
          await c.query(`DROP ROLE IF EXISTS "${user}"`);
        }
      });
    },
  };
}

function mariadbGrants(fx: RelayDbFixture): Grants {
  const made: string[] = [];
  const database = /\/([^/?]+)\?/.exec(fx.dsn)![1]!;
  const admin = async (statements: string[]): Promise<void> => {
    const c = await mysqlAdmin();
    try {
      for (const s of statements) await c.query(s);
    } finally {
      await c.end();
    }
  };
  return {
    dsnAs: (user) => fx.dsn.replace(/^[^@]*@/, `${user}:${PASSWORD}@`),
    async createUser(user, grants) {
      made.push(user);
      await admin([`CREATE USER '${user}'@'%' IDENTIFIED BY '${PASSWORD}'`, ...grants.map((g) => `GRANT ${g.replace(' ON ', ` ON \`${database}\`.`)} TO '${user}'@'%'`)]);
    },
    dropUsers: () => admin(made.map((user) => `DROP USER IF EXISTS '${user}'@'%'`)),
  };
}

const CASES = [
  ['postgres', postgresGrants],
  ['mysql', mariadbGrants],
] as const;

describe.each(CASES)('a relay database user lacking a grant, on %s', (dialect, grantsFor) => {
  let fx: RelayDbFixture;
  let grants: Grants;
  const started: Harness[] = [];
  const tag = `${process.pid}_${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    fx = await createRelayDb(dialect);
    grants = grantsFor(fx);
  });
  afterAll(async () => {
    await Promise.all(started.map((h) => h.close()));
    await grants?.dropUsers();
    await fx?.drop();
  });

  /** Starts sluice as `user`; returns its readiness answer once the database was tried, and its error lines. */
  async function startAs(user: string): Promise<{ h: Harness; ready: { status: number; relayDb: Record<string, unknown> }; errors: string[] }> {
    const logs = capturedLog();
    const h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: grants.dsnAs(user) }, log: logs.log });
    started.push(h);
    const ready = await eventually(
      async () => {
        const r = await fetch(`${h.adminUrl}/readyz`);
        const body = (await r.json()) as { checks: { relayDb: Record<string, unknown> } };
        return body.checks.relayDb.error || body.checks.relayDb.state === 'ok' ? { status: r.status, relayDb: body.checks.relayDb } : false;
      },
      { timeoutMs: 10_000, what: 'the relay database to be tried' },
    );
    return { h, ready, errors: logs.lines.filter((l) => l.level === 50).map((l) => String(l.err)) };
  }

  it.each([
    ['users', ['SELECT ON tokens']],
    ['tokens', ['SELECT ON users']],
  ])('names the missing SELECT on %s and the grant that gives it', async (missing, given) => {
    const user = `sluice_ro_${missing}_${tag}`;
    await grants.createUser(user, [...given]);
    const { h, ready, errors } = await startAs(user);
    expect(ready.status).toBe(503);
    const message = String(ready.relayDb.error);
    expect(message).toContain(`the relay database user "${user}" lacks SELECT on table "${missing}"`);
    expect(message).toMatch(new RegExp(`GRANT SELECT ON (\\S+\\.)?${missing} TO`));
    expect(message).not.toContain("is this the relay's main database");
    expect(message).not.toContain(PASSWORD);
    expect(errors.some((e) => e.includes(`lacks SELECT on table "${missing}"`))).toBe(true);
    // A key cannot be judged meanwhile: 503, as in an outage, not 401.
    expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: 'Bearer sk-abcdefghijklmnopqrstuvwx' } })).status).toBe(503);
  });

  it('works once both grants are there', async () => {
    const user = `sluice_ro_all_${tag}`;
    await grants.createUser(user, ['SELECT ON tokens', 'SELECT ON users']);
    const { h, ready } = await startAs(user);
    expect(ready).toMatchObject({ status: 200, relayDb: { state: 'ok', error: null } });
    const t = await fx.addToken(await fx.addUser());
    expect((await request(h.url, 'GET', '/v1/models', { headers: { authorization: `Bearer sk-${t.key}` } })).status).toBe(200);
  });

  it('names a column of tokens it may not read (a grant of some columns only)', async () => {
    const user = `sluice_ro_cols_${tag}`;
    const key = dialect === 'mysql' ? '`key`' : '"key"';
    await grants.createUser(user, [`SELECT (id, user_id, ${key}, status) ON tokens`, 'SELECT ON users']);
    const { ready } = await startAs(user);
    expect(ready.status).toBe(503);
    // MariaDB names the column (1143); PostgreSQL refuses the table (42501).
    expect(String(ready.relayDb.error)).toContain(dialect === 'mysql' ? `lacks SELECT on column "expired_time" of table "tokens"` : `lacks SELECT on table "tokens"`);
  });
});
