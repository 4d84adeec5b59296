/**
 * vitest globalSetup: the PostgreSQL and MariaDB/MySQL servers the relay-database tests use, and
 * a name prefix that is this run's own.
 *
 * Servers: `TEST_PG_URL` / `TEST_MYSQL_URL` when set (an administrator's connection to the
 * `postgres` / any database), else the machine's own on loopback (postgres with trust on
 * 127.0.0.1:5432, root without a password on 127.0.0.1:3306; `.ci/run` installs and starts them
 * on a fresh machine). Each test file creates its own databases named `<prefix>...` and drops
 * them; at the end of the run every database, role and user with this run's prefix is dropped,
 * whatever a crashed file left. If a server does not answer, the run fails loudly: these tests never skip.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';

declare module 'vitest' {
  export interface ProvidedContext {
    /** An administrator's URL for the PostgreSQL server (database `postgres`). */
    pgAdminUrl: string;
    /** An administrator's URL for the MariaDB/MySQL server. */
    mysqlAdminUrl: string;
    /** Databases this run creates start with this (lower case, letters, digits, `_`). */
    dbPrefix: string;
  }
}

const PG_URL = process.env.TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const MYSQL_URL = process.env.TEST_MYSQL_URL || 'mysql://root@127.0.0.1:3306/';

function log(line: string): void {
  process.stdout.write(`[test databases] ${line}\n`);
}

async function pgDatabases(prefix: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5000 });
  await c.connect();
  try {
    const r = await c.query<{ datname: string }>('SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [prefix]);
    return r.rows.map((x) => x.datname);
  } finally {
    await c.end();
  }
}

async function mysqlConnection(): Promise<mysql.Connection> {
  const u = new URL(MYSQL_URL);
  return mysql.createConnection({
    host: u.hostname,
    port: Number(u.port || 3306),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    connectTimeout: 5000,
  });
}

export default async function setup({ provide }: { provide: (key: 'pgAdminUrl' | 'mysqlAdminUrl' | 'dbPrefix', value: string) => void }) {
  const prefix = `sluice_t${randomBytes(4).toString('hex')}_`;
  const problems: string[] = [];
  try {
    await pgDatabases(prefix);
  } catch (err) {
    problems.push(`PostgreSQL at ${PG_URL.replace(/:[^:@/]*@/, ':***@')}: ${(err as Error).message}`);
  }
  try {
    const c = await mysqlConnection();
    await c.end();
  } catch (err) {
    problems.push(`MariaDB/MySQL at ${MYSQL_URL.replace(/:[^:@/]*@/, ':***@')}: ${(err as Error).message}`);
  }
  if (problems.length) {
    throw new Error(
      `the relay-database tests need PostgreSQL and MariaDB (they are never skipped):\n  ${problems.join('\n  ')}\n` +
        'Run `bash .ci/run` once to install and start them, or set TEST_PG_URL / TEST_MYSQL_URL.',
    );
  }
  log(`PostgreSQL and MariaDB answer; this run's databases start with ${prefix}`);
  provide('pgAdminUrl', PG_URL);
  provide('mysqlAdminUrl', MYSQL_URL);
  provide('dbPrefix', prefix);

  return async () => {
    const left: string[] = [];
    try {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      for (const name of await pgDatabases(prefix)) {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        left.push(name);
      }
      const roles = await c.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)', [prefix]);
      for (const { rolname } of roles.rows) {
        await c.query(`DROP ROLE IF EXISTS "${rolname}"`);
        left.push(rolname);
      }
      await c.end();
    } catch (err) {
      log(`could not drop PostgreSQL databases: ${(err as Error).message}`);
    }
    try {
      const c = await mysqlConnection();
      const [rows] = await c.query('SELECT SCHEMA_NAME AS name FROM information_schema.schemata WHERE SCHEMA_NAME LIKE ?', [`${prefix}%`]);
      for (const r of rows as Array<{ name: string }>) {
        await c.query(`DROP DATABASE IF EXISTS \`${r.name}\``);
        left.push(r.name);
      }
      const [users] = await c.query('SELECT User AS name, Host AS host FROM mysql.user WHERE User LIKE ?', [`${prefix}%`]);
      for (const u of users as Array<{ name: string; host: string }>) {
        await c.query('DROP USER IF EXISTS ?@?', [u.name, u.host]);
        left.push(u.name);
      }
      await c.end();
    } catch (err) {
      log(`could not drop MariaDB databases: ${(err as Error).message}`);
    }
    if (left.length) log(`dropped ${left.length} database(s), role(s) or user(s) the test files left behind`);
  };
}
