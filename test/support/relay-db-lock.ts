/**
 * What the relay-database lock tests need beyond the fixture: a login of sluice's own (so its
 * connections can be counted on the server, apart from the test's), the relay's migration holding
 * `tokens` locked, and a sampler of sluice's server connections.
 */
import mysql from 'mysql2/promise';
import pg from 'pg';
import { inject } from 'vitest';
import { mysqlAdmin, type RelayDbFixture } from './relay-db.js';

/** sluice's connections on the server at one moment, and how long the oldest running statement has run. */
export interface ServerSample {
  atMs: number;
  connections: number;
  oldestStatementMs: number;
}

export interface DedicatedLogin {
  /** The fixture's database through this login, in the relay's SQL_DSN form. */
  dsn: string;
  sample(): Promise<ServerSample>;
  drop(): Promise<void>;
}

let counter = 0;
const loginName = (): string => `${inject('dbPrefix')}ro${process.pid}_${counter++}`;

/**
 * A login that can read the relay's tables and nothing else (as docs/relay-keys.md grants), for
 * the fixture's PostgreSQL or MariaDB database. `sample` asks the server as its administrator.
 */
export async function dedicatedLogin(fx: RelayDbFixture): Promise<DedicatedLogin> {
  const name = loginName();
  const password = 'sluice-lock-test';
  if (fx.dialect === 'postgres') {
    const u = new URL(fx.dsn);
    const database = u.pathname.slice(1);
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    await admin.query(`CREATE ROLE "${name}" LOGIN PASSWORD '${password}'`);
    await admin.query(`GRANT CONNECT ON DATABASE "${database}" TO "${name}"`);
    await fx.exec(`GRANT USAGE ON SCHEMA public TO "${name}"`);
    await fx.exec(`GRANT SELECT ON tokens, users TO "${name}"`);
    u.username = name;
    u.password = password;
    return {
      dsn: u.toString(),
      async sample() {
        const r = await admin.query<{ n: number; oldest: number }>(
          `SELECT count(*)::int AS n,
                  coalesce(max(extract(epoch FROM clock_timestamp() - query_start) * 1000) FILTER (WHERE state = 'active'), 0)::int AS oldest
             FROM pg_stat_activity WHERE usename = $1`,
          [name],
        );
        return { atMs: Date.now(), connections: r.rows[0]!.n, oldestStatementMs: r.rows[0]!.oldest };
      },
      async drop() {
        // The role's grants live in the fixture's database: drop that first (fx.drop), then the role.
        await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [name]);
        await admin.query(`DROP ROLE IF EXISTS "${name}"`).catch(() => {});
        await admin.end();
      },
    };
  }
  if (fx.dialect === 'mysql') {
    const admin = await mysqlAdmin();
    const database = /\/([^/?]+)\?/.exec(fx.dsn)![1]!;
    await admin.query(`CREATE USER '${name}'@'%' IDENTIFIED BY '${password}'`);
    await admin.query(`GRANT SELECT ON \`${database}\`.tokens TO '${name}'@'%'`);
    await admin.query(`GRANT SELECT ON \`${database}\`.users TO '${name}'@'%'`);
    return {
      dsn: fx.dsn.replace(/^[^@]*@/, `${name}:${password}@`),
      async sample() {
        const [rows] = await admin.query(
          `SELECT COUNT(*) AS n, COALESCE(MAX(CASE WHEN COMMAND = 'Query' THEN TIME_MS END), 0) AS oldest FROM information_schema.PROCESSLIST WHERE USER = ?`,
          [name],
        );
        const r = (rows as Array<{ n: number | string; oldest: number | string }>)[0]!;
        return { atMs: Date.now(), connections: Number(r.n), oldestStatementMs: Math.round(Number(r.oldest)) };
      },
      async drop() {
        await admin.query(`DROP USER IF EXISTS '${name}'@'%'`).catch(() => {});
        await admin.end();
      },
    };
  }
  throw new Error('a SQLite file has no logins');
}

/** The relay's migration: `tokens` held exclusively until `release`. */
export interface TableLock {
  release(): Promise<void>;
}

export async function lockTokens(fx: RelayDbFixture): Promise<TableLock> {
  if (fx.dialect === 'postgres') {
    const c = new pg.Client({ connectionString: fx.dsn });
    await c.connect();
    await c.query('BEGIN');
    await c.query('LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE');
    return {
      async release() {
        await c.query('COMMIT');
        await c.end();
      },
    };
  }
  if (fx.dialect === 'mysql') {
    const m = /^([^:]*):([^@]*)@tcp\(([^:]+):(\d+)\)\/([^?]+)/.exec(fx.dsn)!;
    const c = await mysql.createConnection({ user: m[1], password: m[2], host: m[3], port: Number(m[4]), database: m[5] });
    await c.query('LOCK TABLES tokens WRITE');
    return {
      async release() {
        await c.query('UNLOCK TABLES');
        await c.end();
      },
    };
  }
  // SQLite: the relay writing (or migrating) holds the file's lock; readers get SQLITE_BUSY.
  await fx.exec('BEGIN EXCLUSIVE');
  return { release: async () => void (await fx.exec('COMMIT')) };
}
