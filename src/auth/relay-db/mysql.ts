/**
 * The relay's MySQL/MariaDB database through mysql2: a pool of at most `poolSize` server
 * connections, whatever the database does, and each statement ended on the server.
 *
 * Each connection's session bounds its statements on the server: MariaDB's `max_statement_time`
 * (which also ends a wait on a table lock, such as the relay's migration holding
 * `LOCK TABLES tokens WRITE`), and `lock_wait_timeout` for lock waits on MySQL, which has no
 * `max_statement_time`; there each SELECT also carries MySQL's `MAX_EXECUTION_TIME` hint (a
 * comment to MariaDB 10). A connection stays out of the pool until the server has answered, so a
 * replacement never runs beside a statement still on the server.
 *
 * One that does not answer at all (a network partition) is ended with `KILL CONNECTION` from a
 * connection of its own once the server's bound has passed, and leaves the pool only when the
 * server has confirmed it (or says the thread is gone already: another server now answers at the
 * address). Closing the socket alone would not do: a server cut off from the client never sees
 * the close, and keeps the thread, idle, for `wait_timeout` (8 hours by default), while the pool
 * opened another. Until a KILL gets through, the connection keeps its place in the pool.
 */
import mysql from 'mysql2';
import type { RelayDsn } from './dsn.js';
import { ANSWER_GRACE_MS, safeError, type DriverOptions, type RelayDbDriver } from './driver.js';
import type { Statement } from './sql.js';

/** After the server's bound, how long more a silent server's connection is held before it is closed. */
const SILENT_SERVER_MARGIN_MS = 1000;

export function openMysql(dsn: Extract<RelayDsn, { dialect: 'mysql' }>, opts: DriverOptions): RelayDbDriver {
  const timeoutMs = opts.queryTimeoutMs;
  const server: mysql.ConnectionOptions = {
    ...(dsn.socketPath ? { socketPath: dsn.socketPath } : { host: dsn.host, port: dsn.port }),
    user: dsn.user,
    password: dsn.password,
    database: dsn.database,
    connectTimeout: Math.min(dsn.connectTimeoutMs ?? timeoutMs, timeoutMs),
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: false,
    dateStrings: true,
    ...(dsn.tls === 'off' ? {} : { ssl: { rejectUnauthorized: dsn.tls === 'verify' } }),
  };
  const pool = mysql.createPool({
    ...server,
    connectionLimit: opts.poolSize,
    // Requests wait for a free connection at most this many deep; the source batches, so a full
    // queue means the database is not keeping up.
    queueLimit: 64,
  });
  const state = { closed: false };
  pool.on('connection', (c) => {
    // A pooled connection that breaks while idle is reported on it; the next query reconnects.
    c.on('error', () => {});
    // Issued here, the statement runs before the pool hands the connection out.
    c.query(sessionStatement(timeoutMs), () => {});
  });
  const secrets = dsn.password.length ? [dsn.password] : [];
  return {
    dialect: 'mysql',
    async query(s) {
      try {
        return await boundedOnServer(pool, server, state, s, timeoutMs);
      } catch (err) {
        throw safeError(err, secrets);
      }
    },
    close: () => {
      state.closed = true;
      return new Promise<void>((resolve) => pool.end(() => resolve()));
    },
  };
}

/**
 * Set once per connection:
 * - mysql2 escapes bound values itself, with backslashes: a server in NO_BACKSLASH_ESCAPES mode
 *   would read them otherwise. Keys reaching here are alphanumeric anyway (rules.ts); this keeps
 *   the escaping sound for any value.
 * - the statement bounds: `lock_wait_timeout` (whole seconds, both servers) and, in a comment only
 *   MariaDB executes, `max_statement_time` (seconds, to the microsecond).
 */
function sessionStatement(timeoutMs: number): string {
  return (
    "SET SESSION sql_mode = REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', ''), " +
    `lock_wait_timeout = ${Math.max(1, Math.ceil(timeoutMs / 1000))} /*M!100108 , max_statement_time = ${(timeoutMs / 1000).toFixed(3)} */`
  );
}

/** MySQL's own bound on a SELECT's execution (MariaDB 10 reads the hint as a comment). */
function withExecutionTime(sql: string, timeoutMs: number): string {
  return sql.replace(/^SELECT /, `SELECT /*+ MAX_EXECUTION_TIME(${timeoutMs}) */ `);
}

type Rows = Array<Record<string, unknown>>;

function boundedOnServer(pool: mysql.Pool, server: mysql.ConnectionOptions, state: { closed: boolean }, s: Statement, timeoutMs: number): Promise<Rows> {
  return new Promise<Rows>((resolve, reject) => {
    pool.getConnection((err, conn) => {
      if (err) return reject(err);
      let released = false;
      let silent: NodeJS.Timeout | undefined;
      const release = (destroy: boolean): void => {
        if (released) return;
        released = true;
        clearTimeout(silent);
        if (destroy) conn.destroy();
        else conn.release();
      };
      const whenSilent = (): void => {
        if (released || state.closed) return;
        killThread(server, conn.threadId).then(
          () => release(true),
          () => {
            silent = setTimeout(whenSilent, timeoutMs + SILENT_SERVER_MARGIN_MS);
            silent.unref();
          },
        );
      };
      silent = setTimeout(whenSilent, timeoutMs + SILENT_SERVER_MARGIN_MS);
      silent.unref();
      // `timeout` answers the caller without the server; the connection is held until the server
      // answers ('end': a result or an error) or has confirmed its thread ended.
      const cmd = conn.query({ sql: withExecutionTime(s.sql, timeoutMs), values: s.params, timeout: timeoutMs + ANSWER_GRACE_MS }, (e, rows) =>
        e ? reject(e) : resolve(rows as Rows),
      );
      cmd.once('end', () => release(false));
    });
  });
}

/** ER_NO_SUCH_THREAD: the server has no such thread (ended already, or another server answers). */
const NO_SUCH_THREAD = 1094;

/** Ends a thread from a short-lived connection of its own (a user may always end its own threads). */
function killThread(server: mysql.ConnectionOptions, threadId: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const c = mysql.createConnection(server);
    c.on('error', () => {});
    c.query('KILL CONNECTION ?', [threadId], (err) => {
      c.destroy();
      if (!err || err.errno === NO_SUCH_THREAD) resolve();
      else reject(err);
    });
  });
}
