/** The relay's MySQL/MariaDB database through mysql2: a small pool, bounded connect and query. */
import mysql from 'mysql2/promise';
import type { RelayDsn } from './dsn.js';
import { safeError, type DriverOptions, type RelayDbDriver } from './driver.js';

interface CoreConnection {
  query(sql: string, callback: (err: Error | null) => void): void;
}

export function openMysql(dsn: Extract<RelayDsn, { dialect: 'mysql' }>, opts: DriverOptions): RelayDbDriver {
  const pool = mysql.createPool({
    ...(dsn.socketPath ? { socketPath: dsn.socketPath } : { host: dsn.host, port: dsn.port }),
    user: dsn.user,
    password: dsn.password,
    database: dsn.database,
    connectionLimit: opts.poolSize,
    // Requests wait for a free connection at most this many deep; the source batches, so a full
    // queue means the database is not keeping up.
    queueLimit: 64,
    connectTimeout: Math.min(dsn.connectTimeoutMs ?? opts.queryTimeoutMs, opts.queryTimeoutMs),
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: false,
    dateStrings: true,
    ...(dsn.tls === 'off' ? {} : { ssl: { rejectUnauthorized: dsn.tls === 'verify' } }),
  });
  pool.on('connection', (c) => {
    // A pooled connection that breaks while idle is reported on it; the next query reconnects.
    c.on('error', () => {});
    // mysql2 escapes bound values itself, with backslashes: a server in NO_BACKSLASH_ESCAPES mode
    // would read them otherwise. Keys reaching here are alphanumeric anyway (rules.ts); this keeps
    // the escaping sound for any value.
    // (The promise pool re-emits the core pool's event: `c` is a callback-style connection, whatever
    // its type says. Issued here, the statement runs before the pool hands the connection out.)
    (c as unknown as CoreConnection).query("SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', '')", () => {});
  });
  const secrets = dsn.password.length ? [dsn.password] : [];
  return {
    dialect: 'mysql',
    async query(s) {
      try {
        const [rows] = await pool.query({ sql: s.sql, values: s.params, timeout: opts.queryTimeoutMs });
        return rows as Array<Record<string, unknown>>;
      } catch (err) {
        throw safeError(err, secrets);
      }
    },
    close: () => pool.end(),
  };
}
