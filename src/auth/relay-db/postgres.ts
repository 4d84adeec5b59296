/** The relay's PostgreSQL database through node-postgres: a small pool, client-side timeouts. */
import pg from 'pg';
import type { RelayDsn } from './dsn.js';
import { safeError, type DriverOptions, type RelayDbDriver } from './driver.js';

export function openPostgres(dsn: Extract<RelayDsn, { dialect: 'postgres' }>, opts: DriverOptions): RelayDbDriver {
  const secrets = passwordOf(dsn.connectionString);
  const pool = new pg.Pool({
    connectionString: dsn.connectionString,
    max: opts.poolSize,
    connectionTimeoutMillis: opts.queryTimeoutMs,
    // Client-side bound (the socket is dropped) and server-side bound (the statement is cancelled).
    query_timeout: opts.queryTimeoutMs,
    statement_timeout: opts.queryTimeoutMs,
    idleTimeoutMillis: 30_000,
    application_name: 'sluice',
    allowExitOnIdle: true,
  });
  // An idle connection that breaks (the server restarted) is reported here; without a listener it
  // would end the process. The next query opens a new one.
  pool.on('error', () => {});
  return {
    dialect: 'postgres',
    async query(s) {
      try {
        const r = await pool.query(s.sql, s.params);
        return r.rows as Array<Record<string, unknown>>;
      } catch (err) {
        throw safeError(err, secrets);
      }
    },
    close: () => pool.end(),
  };
}

function passwordOf(url: string): string[] {
  try {
    const p = decodeURIComponent(new URL(url).password);
    return p ? [p] : [];
  } catch {
    return [];
  }
}
