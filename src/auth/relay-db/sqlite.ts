/**
 * The relay's SQLite file through better-sqlite3, which is synchronous: it runs in one worker
 * thread so a read (or a wait on the relay's write lock) never holds the event loop. The file is
 * opened read-only and must exist; a statement waits at most the query timeout for a lock, counted
 * from when it was asked (time spent queued behind another statement included).
 *
 * better-sqlite3 is an optional dependency (a native addon built from source): an install whose
 * build failed still runs for everyone not using SQLite, and naming a SQLite file then fails at
 * start-up with the fix.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ConfigError } from '../../config/error.js';
import type { RelayDsn } from './dsn.js';
import { ANSWER_GRACE_MS, withTimeout, type DriverOptions, type RelayDbDriver } from './driver.js';

/**
 * The worker's code, evaluated as CommonJS: the same text runs under tsx, vitest and the compiled
 * image, with no second file to locate. It opens the file lazily (and again after a failure), so
 * a file that appears later, or comes back, is picked up. Statements run one at a time; each
 * waits for the relay's lock only until its deadline (clock: timeOrigin + now, shared with the
 * parent), and one whose deadline passed while it queued is not run: its caller has given up.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.module);
let db = null;
parentPort.on('message', ({ id, sql, params, deadline }) => {
  try {
    const left = Math.floor(deadline - (performance.timeOrigin + performance.now()));
    if (left < 1) throw new Error('the SQLite statement waited past the query timeout behind another');
    if (db === null) db = new Database(workerData.path, { readonly: true, fileMustExist: true, timeout: left });
    else db.pragma('busy_timeout = ' + left);
    const rows = db.prepare(sql).all(...params);
    parentPort.postMessage({ id, rows });
  } catch (err) {
    if (db !== null && !db.open) db = null;
    if (err && (err.code === 'SQLITE_CANTOPEN' || err.code === 'SQLITE_NOTADB' || err.code === 'SQLITE_CORRUPT')) { try { db && db.close(); } catch {} db = null; }
    parentPort.postMessage({ id, error: String(err && err.message || err), code: err && err.code });
  }
});
`;

interface Reply {
  id: number;
  rows?: Array<Record<string, unknown>>;
  error?: string;
  code?: string;
}

/** The resolved path of better-sqlite3, or a start-up error that says how to get it. */
export function sqliteModulePath(setting: string): string {
  try {
    return createRequire(import.meta.url).resolve('better-sqlite3');
  } catch {
    throw new ConfigError(
      `${setting} names a SQLite database, but the optional package better-sqlite3 is not installed (its native build may have failed): ` +
        'install a C++ toolchain (python3, make, g++) and run "npm rebuild better-sqlite3", or give sluice the relay\'s PostgreSQL or MySQL database',
    );
  }
}

export interface SqliteDriver extends RelayDbDriver {
  /** Ends the worker thread as a crash would; the next statement starts a new one. */
  endWorker(): Promise<void>;
}

export function openSqlite(dsn: Extract<RelayDsn, { dialect: 'sqlite' }>, opts: DriverOptions): SqliteDriver {
  const module = sqliteModulePath('SLUICE_RELAY_DB');
  const waiting = new Map<number, { resolve: (rows: Array<Record<string, unknown>>) => void; reject: (e: Error) => void }>();
  let next = 0;
  let closed = false;
  let worker: Worker | null = null;

  /** The worker thread, started again on the next statement if the last one died. */
  const running = (): Worker => {
    if (worker) return worker;
    const w = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module, path: dsn.path },
      // A worker of its own: none of the parent's --import hooks are needed for plain CommonJS.
      execArgv: [],
    });
    // The worker holds no request: it must not keep the process alive on its own.
    w.unref();
    w.on('message', (r: Reply) => {
      const p = waiting.get(r.id);
      if (!p) return;
      waiting.delete(r.id);
      if (r.error !== undefined) p.reject(Object.assign(new Error(r.error), { code: r.code }));
      else p.resolve(r.rows ?? []);
    });
    const died = (err: Error): void => {
      if (worker === w) worker = null;
      for (const p of waiting.values()) p.reject(err);
      waiting.clear();
    };
    w.on('error', died);
    w.on('exit', (code) => died(new Error(`the SQLite worker thread exited (${code})`)));
    worker = w;
    return w;
  };

  return {
    dialect: 'sqlite',
    query(s) {
      if (closed) return Promise.reject(new Error('the SQLite reader is closed'));
      const w = running();
      const id = next++;
      const answer = new Promise<Array<Record<string, unknown>>>((resolve, reject) => waiting.set(id, { resolve, reject }));
      w.postMessage({ id, sql: s.sql, params: s.params, deadline: performance.timeOrigin + performance.now() + opts.queryTimeoutMs });
      // The worker answers every statement in order, each by its deadline; one that outlives it
      // anyway (a slow disk) is given up here (its answer, when it comes, finds no one waiting).
      return withTimeout(answer, opts.queryTimeoutMs + ANSWER_GRACE_MS, 'a SQLite statement').catch((err: Error) => {
        waiting.delete(id);
        throw err;
      });
    },
    async close() {
      closed = true;
      await worker?.terminate();
    },
    async endWorker() {
      await worker?.terminate();
    },
  };
}
