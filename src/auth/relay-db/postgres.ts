/**
 * The relay's PostgreSQL database through node-postgres: a pool of at most `poolSize` server
 * connections, whatever the database does, and each statement ended on the server.
 *
 * A client-side timeout alone leaks connections: node-postgres drops its socket, but a backend
 * waiting on a lock (the relay's migration holding `tokens`) never notices a closed socket, and
 * the pool opens another beside it. So each statement runs in a read-only transaction that first
 * sets, with SET LOCAL, `statement_timeout` and `lock_timeout` to what is left of the query
 * timeout: the server cancels the statement itself, and the connection goes back to the pool
 * once the server has answered. SET LOCAL ends with the transaction, so it is valid through
 * PgBouncer in transaction mode (start-up parameters, node-postgres' way to send these, are
 * refused by PgBouncer and managed poolers; the relay's driver sends none).
 *
 * A server that does not answer at all (a network partition) keeps its connection's pool slot
 * until the server's own bounds have ended the backend: the statement's timeout, then
 * `idle_in_transaction_session_timeout` (also SET LOCAL), which ends a session whose client went
 * silent mid-transaction. Only then is the socket closed and a new connection allowed. The
 * statement runs inside a savepoint because a failed transaction drops its SET LOCAL values at
 * once: only a failed subtransaction leaves the idle timeout standing.
 */
import pg from 'pg';
import type { RelayDsn } from './dsn.js';
import { ANSWER_GRACE_MS, safeError, type DriverOptions, type RelayDbDriver } from './driver.js';
import type { Statement } from './sql.js';

/** After the server's bounds, how long more a silent server's connection is held before it is closed. */
const SILENT_SERVER_MARGIN_MS = 1000;

export function openPostgres(dsn: Extract<RelayDsn, { dialect: 'postgres' }>, opts: DriverOptions): RelayDbDriver {
  const secrets = passwordOf(dsn.connectionString);
  const pool = new pg.Pool({
    connectionString: libpqSemantics(dsn.connectionString),
    max: opts.poolSize,
    connectionTimeoutMillis: opts.queryTimeoutMs,
    // No query_timeout: on it node-postgres drops the connection while the server still runs the
    // statement, and the pool opens a replacement beside it.
    idleTimeoutMillis: 30_000,
    application_name: 'sluice',
    allowExitOnIdle: true,
  });
  // An idle connection that breaks (the server restarted) is reported here; without a listener it
  // would end the process. The next query opens a new one.
  pool.on('error', () => {});
  // The same for a connection in use: the statement's own error says what happened.
  pool.on('connect', (client) => client.on('error', () => {}));
  return {
    dialect: 'postgres',
    async query(s) {
      try {
        return await boundedOnServer(pool, s, opts.queryTimeoutMs);
      } catch (err) {
        throw safeError(err, secrets);
      }
    },
    close: () => pool.end(),
  };
}

/**
 * Runs `s` on a pooled connection within `timeoutMs` (connecting included), cancelled by the
 * server past it. Answers within the bound (and the answer's way back); the connection returns to
 * the pool only when the server is done with it.
 */
async function boundedOnServer(pool: pg.Pool, s: Statement, timeoutMs: number): Promise<Array<Record<string, unknown>>> {
  const started = performance.now();
  const client = await pool.connect();
  const left = Math.floor(timeoutMs - (performance.now() - started));
  if (left < 1) {
    client.release();
    throw new Error(`connecting to the relay database took longer than ${timeoutMs} ms`);
  }
  let released = false;
  const release = (destroy?: Error): void => {
    if (released) return;
    released = true;
    client.release(destroy);
  };
  // A lock wait ends a little before the statement's bound, so the error names the lock.
  const lockMs = Math.max(1, Math.floor(left * 0.9));
  const work = (async () => {
    await client.query(
      `BEGIN READ ONLY; SET LOCAL statement_timeout = ${left}; SET LOCAL lock_timeout = ${lockMs}; SET LOCAL idle_in_transaction_session_timeout = ${timeoutMs}; SAVEPOINT bounded`,
    );
    const r = await client.query(s.sql, s.params);
    await client.query('COMMIT');
    return r.rows as Array<Record<string, unknown>>;
  })();
  // The server's bounds end the backend by then, even if no answer reaches us.
  const silent = setTimeout(() => release(new Error('the relay database did not answer')), left + timeoutMs + SILENT_SERVER_MARGIN_MS);
  silent.unref();
  work.then(
    () => {
      clearTimeout(silent);
      release();
    },
    () =>
      // The server answered with an error (the statement cancelled) and the connection is sound:
      // back to a clean state and to the pool. A broken connection fails the ROLLBACK and is closed.
      client.query('ROLLBACK').then(
        () => {
          clearTimeout(silent);
          release();
        },
        (err: Error) => {
          clearTimeout(silent);
          release(err);
        },
      ),
  );
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`a relay database statement took longer than ${timeoutMs} ms`)), left + ANSWER_GRACE_MS);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * The relay's driver (pgx) reads `sslmode` as libpq does: `require` encrypts without verifying
 * the certificate. node-postgres 8 reads `require` as `verify-full` unless asked for libpq's
 * meaning, so the same SQL_DSN against a managed database with a private CA would work for the
 * relay and fail for sluice. One difference stays: libpq's `prefer` falls back to plain text
 * when the server offers no TLS; node-postgres then fails (use `sslmode=disable` there).
 */
export function libpqSemantics(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  if (!u.searchParams.has('sslmode') || u.searchParams.has('uselibpqcompat')) return url;
  u.searchParams.set('uselibpqcompat', 'true');
  return u.toString();
}

function passwordOf(url: string): string[] {
  try {
    const p = decodeURIComponent(new URL(url).password);
    return p ? [p] : [];
  } catch {
    return [];
  }
}
