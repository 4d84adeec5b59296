/**
 * A relay database of the test's own, with the relay's tables (test/support/relay-schema.ts), and
 * the changes the relay's console makes: create a user or token, disable, soft-delete (new-api) or
 * delete (one-api), expire, drain the quota. `dsn` is the value an operator would give sluice: the
 * relay's own SQL_DSN form for PostgreSQL and MySQL, `sqlite:<file>` for SQLite.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { inject } from 'vitest';
import { relayDdl, type Dialect, type RelayFlavour } from './relay-schema.js';

export type { Dialect, RelayFlavour };

/** How the suite's MariaDB administrator connects (test/setup/databases.ts: `mysqlAdminUrl`). */
export function mysqlAdminOptions(): { host: string; port: number; user: string; password: string } {
  const u = new URL(inject('mysqlAdminUrl'));
  return { host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) };
}

/** A connection as the suite's MariaDB administrator; the caller ends it. */
export function mysqlAdmin(extra: mysql.ConnectionOptions = {}): Promise<mysql.Connection> {
  return mysql.createConnection({ ...mysqlAdminOptions(), ...extra });
}
export const DIALECTS: Dialect[] = ['postgres', 'mysql', 'sqlite'];

export interface TokenFields {
  status?: number;
  expired_time?: number;
  remain_quota?: number;
  unlimited_quota?: boolean;
}

export interface RelayDbFixture {
  dialect: Dialect;
  flavour: RelayFlavour;
  /** What SLUICE_RELAY_DB is set to. */
  dsn: string;
  /** Statements use `?` placeholders on every dialect. */
  exec(sql: string, params?: unknown[]): Promise<Array<Record<string, unknown>>>;
  addUser(fields?: { status?: number }): Promise<number>;
  /** A token as the console makes it (48 of [0-9a-zA-Z] unless `key` is given); returns its id and key (no `sk-`). */
  addToken(userId: number, fields?: TokenFields & { key?: string }): Promise<{ id: number; key: string }>;
  setToken(id: number, fields: TokenFields): Promise<void>;
  /** The console's delete: soft on new-api, the row on one-api. */
  deleteToken(id: number): Promise<void>;
  setUserStatus(id: number, status: number): Promise<void>;
  /** new-api's soft delete of a user (its tokens stay). */
  softDeleteUser(id: number): Promise<void>;
  /** An administrator's hard delete: the user row goes (the tokens are left here, to test that case). */
  hardDeleteUser(id: number): Promise<void>;
  drop(): Promise<void>;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** A key as new-api's console generates it. */
export function consoleKey(): string {
  const bytes = randomBytes(48);
  let s = '';
  for (const b of bytes) s += ALNUM[b % ALNUM.length];
  return s;
}

let counter = 0;
function dbName(): string {
  return `${inject('dbPrefix')}${process.pid}_${counter++}`;
}

export async function createRelayDb(dialect: Dialect, flavour: RelayFlavour = 'new-api'): Promise<RelayDbFixture> {
  const name = dbName();
  let exec: RelayDbFixture['exec'];
  let dsn: string;
  let drop: () => Promise<void>;
  if (dialect === 'postgres') {
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    await admin.end();
    const u = new URL(inject('pgAdminUrl'));
    u.pathname = `/${name}`;
    dsn = u.toString();
    const pool = new pg.Pool({ connectionString: dsn, max: 2 });
    pool.on('error', () => {});
    exec = async (sql, params = []) => {
      let i = 0;
      return (
        await pool.query(
          sql.replace(/\?/g, () => `$${++i}`),
          params,
        )
      ).rows as Array<Record<string, unknown>>;
    };
    drop = async () => {
      await pool.end();
      const a = new pg.Client({ connectionString: inject('pgAdminUrl') });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await a.end();
    };
  } else if (dialect === 'mysql') {
    const conn = mysqlAdminOptions();
    const admin = await mysqlAdmin();
    await admin.query(`CREATE DATABASE \`${name}\` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci`);
    await admin.end();
    const pool = mysql.createPool({ ...conn, database: name, connectionLimit: 2 });
    dsn = `${conn.user}:${conn.password}@tcp(${conn.host}:${conn.port})/${name}?charset=utf8mb4&parseTime=True&loc=Local`;
    exec = async (sql, params = []) => (await pool.query(sql, params))[0] as Array<Record<string, unknown>>;
    drop = async () => {
      await pool.end();
      const a = await mysqlAdmin();
      await a.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await a.end();
    };
  } else {
    type Db = { prepare(sql: string): { all(...p: unknown[]): unknown[]; run(...p: unknown[]): unknown; reader: boolean }; close(): void };
    const Database = createRequire(import.meta.url)('better-sqlite3') as new (path: string) => Db;
    const dir = mkdtempSync(join(tmpdir(), `${name}-`));
    const file = join(dir, 'one-api.db');
    const db = new Database(file);
    dsn = `sqlite:${file}`;
    exec = async (sql, params = []) => {
      const st = db.prepare(sql);
      const p = params.map((v) => (typeof v === 'boolean' ? (v ? 1 : 0) : v));
      if (st.reader) return st.all(...p) as Array<Record<string, unknown>>;
      st.run(...p);
      return [];
    };
    drop = async () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  for (const stmt of relayDdl(dialect, flavour)) await exec(stmt);

  const q = (n: string): string => (dialect === 'mysql' ? `\`${n}\`` : `"${n}"`);
  const now = (): number => Math.floor(Date.now() / 1000);
  const deletedAt = dialect === 'sqlite' ? new Date().toISOString() : new Date();
  const soft = flavour !== 'one-api';
  const returningId = async (sql: string, params: unknown[]): Promise<number> => {
    if (dialect === 'postgres') return Number((await exec(`${sql} RETURNING id`, params))[0]!.id);
    await exec(sql, params);
    const r = await exec(dialect === 'mysql' ? 'SELECT LAST_INSERT_ID() AS id' : 'SELECT last_insert_rowid() AS id');
    return Number(r[0]!.id);
  };
  let users = 0;
  return {
    dialect,
    flavour,
    dsn,
    exec,
    async addUser(fields = {}) {
      users++;
      return returningId(`INSERT INTO users (username, password, display_name, role, status, ${q('group')}) VALUES (?, ?, ?, 1, ?, 'default')`, [
        `user${users}_${randomBytes(3).toString('hex')}`,
        'x',
        'User',
        fields.status ?? 1,
      ]);
    },
    async addToken(userId, fields = {}) {
      const key = fields.key ?? consoleKey();
      const id = await returningId(
        `INSERT INTO tokens (user_id, ${q('key')}, status, name, created_time, accessed_time, expired_time, remain_quota, unlimited_quota) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [userId, key, fields.status ?? 1, 'token', now(), now(), fields.expired_time ?? -1, fields.remain_quota ?? 500000, fields.unlimited_quota ?? false],
      );
      return { id, key };
    },
    async setToken(id, fields) {
      const entries = Object.entries(fields);
      await exec(`UPDATE tokens SET ${entries.map(([k]) => `${q(k)} = ?`).join(', ')} WHERE id = ?`, [...entries.map(([, v]) => v), id]);
    },
    async deleteToken(id) {
      if (soft) await exec('UPDATE tokens SET deleted_at = ? WHERE id = ?', [deletedAt, id]);
      else await exec('DELETE FROM tokens WHERE id = ?', [id]);
    },
    async setUserStatus(id, status) {
      await exec('UPDATE users SET status = ? WHERE id = ?', [status, id]);
    },
    async softDeleteUser(id) {
      if (!soft) throw new Error('one-api has no soft delete of users (it sets status 3)');
      await exec('UPDATE users SET deleted_at = ? WHERE id = ?', [deletedAt, id]);
    },
    async hardDeleteUser(id) {
      await exec('DELETE FROM users WHERE id = ?', [id]);
    },
    drop,
  };
}
