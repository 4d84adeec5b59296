/**
 * The read-only user of docs/relay-keys.md ("Grants: a read-only user") suffices: its statements,
 * run as written (user, database and password replaced as the page says), on the real PostgreSQL
 * and MariaDB, make a user through which sluice authenticates a key of the relay's console, and
 * which can read nothing else and write nothing. Without the grant on `users` the same user is not
 * enough, so the test shows the grants are what makes it work.
 */
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { startHarness } from '../support/harness.js';
import { chat } from '../support/http.js';
import { createRelayDb, mysqlAdminOptions, type RelayDbFixture } from '../support/relay-db.js';

const PAGE = readFileSync(new URL('../../docs/relay-keys.md', import.meta.url), 'utf8');

/** The page's grant statements for one server, in order (the sql block after its heading line). */
function documentedGrants(heading: string): string[] {
  const section = PAGE.slice(PAGE.indexOf('## Grants: a read-only user'));
  const at = section.indexOf(`\n${heading}`);
  if (at === -1) throw new Error(`docs/relay-keys.md has no "${heading}" under Grants`);
  const block = /```sql\n([\s\S]*?)\n```/.exec(section.slice(at));
  if (!block) throw new Error(`no sql block after "${heading}"`);
  return block[1]!
    .split(';')
    .map((x) => x.trim())
    .filter(Boolean);
}

/** The statements with the page's three placeholders replaced, as the page tells the reader. */
function replaced(statements: string[], user: string, database: string, password: string): string[] {
  return statements.map((st) => st.replaceAll('sluice_ro', user).replaceAll('newapi', database).replaceAll('CHANGE-ME', password));
}

/** sluice on `dsn` (the read-only user): the answer to a console key, with readiness as /readyz says. */
async function throughSluice(dsn: string, key: string): Promise<{ status: number; relayDb: unknown }> {
  const h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: dsn } });
  try {
    const r = await chat(h.url, key);
    const ready = (await (await fetch(`${h.adminUrl}/readyz`)).json()) as { checks?: { relayDb?: unknown } };
    return { status: r.status, relayDb: ready.checks?.relayDb };
  } finally {
    await h.close();
  }
}

const password = `pw${randomBytes(8).toString('hex')}`;
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

describe('a read-only PostgreSQL role with the documented grants', () => {
  it('authenticates a console key through sluice, and can neither write nor read beyond tokens and users', async () => {
    const fx: RelayDbFixture = await createRelayDb('postgres');
    const role = `sluice_ro_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    cleanups.push(async () => {
      await fx.drop();
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    });
    const database = new URL(fx.dsn).pathname.slice(1);
    const grants = replaced(documentedGrants('PostgreSQL'), role, database, password);
    expect(grants).toHaveLength(4);
    for (const st of grants) await fx.exec(st);

    const dsn = new URL(fx.dsn);
    dsn.username = role;
    dsn.password = password;
    const token = await fx.addToken(await fx.addUser());
    const ok = await throughSluice(dsn.toString(), `sk-${token.key}`);
    expect(ok.status).toBe(200);
    expect(ok.relayDb).toMatchObject({ state: 'ok', schema: 'new-api' });

    // Read-only, and only the two tables.
    const ro = new pg.Client({ connectionString: dsn.toString() });
    await ro.connect();
    try {
      await expect(ro.query('UPDATE tokens SET status = 2')).rejects.toThrow(/permission denied/);
      await expect(ro.query('CREATE TABLE x (id int)')).rejects.toThrow(/permission denied/);
      await fx.exec('CREATE TABLE options (k text)');
      await expect(ro.query('SELECT * FROM options')).rejects.toThrow(/permission denied/);
    } finally {
      await ro.end();
    }

    // The grant on users is needed: without it the same role cannot judge the key.
    await fx.exec(`REVOKE SELECT ON users FROM ${role}`);
    const without = await throughSluice(dsn.toString(), `sk-${token.key}`);
    expect(without.status).toBe(503);
  });
});

describe('a read-only MariaDB user with the documented grants', () => {
  it('authenticates a console key through sluice, and can neither write nor read beyond tokens and users', async () => {
    const fx: RelayDbFixture = await createRelayDb('mysql');
    const user = `sluice_ro_${randomBytes(4).toString('hex')}`;
    const { host, port } = mysqlAdminOptions();
    const conn = { host, port };
    cleanups.push(async () => {
      await fx.exec(`DROP USER IF EXISTS '${user}'@'%'`);
      await fx.drop();
    });
    const database = /\/([^/?]+)\?/.exec(fx.dsn)![1]!;
    const grants = replaced(documentedGrants('MySQL / MariaDB'), user, database, password);
    expect(grants).toHaveLength(3);
    for (const st of grants) await fx.exec(st);

    const dsn = `${user}:${password}@tcp(${conn.host}:${conn.port})/${database}?charset=utf8mb4&parseTime=True&loc=Local`;
    const token = await fx.addToken(await fx.addUser());
    const ok = await throughSluice(dsn, `sk-${token.key}`);
    expect(ok.status).toBe(200);
    expect(ok.relayDb).toMatchObject({ state: 'ok', schema: 'new-api' });

    const ro = await mysql.createConnection({ ...conn, user, password, database });
    try {
      await expect(ro.query('UPDATE tokens SET status = 2')).rejects.toThrow(/denied/);
      await expect(ro.query('CREATE TABLE x (id int)')).rejects.toThrow(/denied/);
      await fx.exec('CREATE TABLE options (k text)');
      await expect(ro.query('SELECT * FROM options')).rejects.toThrow(/denied/);
    } finally {
      await ro.end();
    }

    await fx.exec(`REVOKE SELECT ON ${database}.users FROM '${user}'@'%'`);
    const without = await throughSluice(dsn, `sk-${token.key}`);
    expect(without.status).toBe(503);
  });
});
