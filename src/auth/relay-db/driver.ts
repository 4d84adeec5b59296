/**
 * The narrow interface between the relay key source and a database: run one read-only statement,
 * close. One implementation per driver (pg, mysql2, better-sqlite3 in a worker thread), each with
 * a small pool and every wait bounded.
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
  /** Bound on one statement, connecting included. */
  queryTimeoutMs: number;
}

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
