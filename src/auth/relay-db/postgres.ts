/** The relay's PostgreSQL database through node-postgres: a small pool, client-side timeouts. */
import pg from 'pg';
import type { RelayDsn } from './dsn.js';
import { safeError, type DriverOptions, type RelayDbDriver } from './driver.js';

export function openPostgres(dsn: Extract<RelayDsn, { dialect: 'postgres' }>, opts: DriverOptions): RelayDbDriver {
  const secrets = passwordOf(dsn.connectionString);
  const pool = new pg.Pool({
    connectionString: libpqSemantics(dsn.connectionString),
    max: opts.poolSize,
    connectionTimeoutMillis: opts.queryTimeoutMs,
    // A client-side bound. Not statement_timeout: node-postgres sends that as a start-up
    // parameter, which PgBouncer and managed poolers refuse (the relay's driver sends none).
    query_timeout: opts.queryTimeoutMs,
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
