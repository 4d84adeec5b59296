/**
 * The narrow interface between the relay key source and a database: run one read-only statement,
 * close. One implementation per driver (pg, mysql2, better-sqlite3 in a worker thread), each with
 * a small pool and every wait bounded.
 *
 * Each driver keeps at most `poolSize` connections on the server whatever the database does: a
 * statement past the query timeout is ended by the server itself (a client giving up alone would
 * leave it running there, waiting on a lock, while the pool opened another), and a connection
 * goes back to the pool, or is replaced, only once the server is done with it.
 */
import type { RelayDsn } from './dsn.js';
import type { Dialect, Statement } from './sql.js';

export interface RelayDbDriver {
  readonly dialect: Dialect;
  query(statement: Statement): Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

export interface DriverOptions {
  /** Connections at most (one worker thread for SQLite). */
  poolSize: number;
  /** Bound on one statement, connecting included; the server ends the statement past it. */
  queryTimeoutMs: number;
}

/**
 * How long after the query timeout a caller still waits for the server's own answer (the
 * statement cancelled, with its reason) before giving up without it.
 */
export const ANSWER_GRACE_MS = 250;

export async function openDriver(dsn: RelayDsn, opts: DriverOptions): Promise<RelayDbDriver> {
  switch (dsn.dialect) {
    case 'postgres':
      return (await import('./postgres.js')).openPostgres(dsn, opts);
    case 'mysql':
      return (await import('./mysql.js')).openMysql(dsn, opts);
    case 'sqlite':
      return (await import('./sqlite.js')).openSqlite(dsn, opts);
  }
}

/** Rejects with a timeout error when `work` has not settled within `ms` (the work itself runs on). */
export function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A driver's error as it may be logged: its message with any password that appears in it
 * removed (the drivers do not put one there, but a message can quote a DSN).
 */
export function safeError(err: unknown, secrets: readonly string[]): Error {
  let message = err instanceof Error ? err.message : String(err);
  for (const s of secrets) if (s.length >= 3) message = message.split(s).join('***');
  const out = new Error(message);
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') (out as Error & { code?: string }).code = code;
  return out;
}
