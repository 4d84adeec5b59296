/**
 * Keys from the relay's own database, as a key source: a key created in the relay's console
 * authenticates on its first use, and one deleted, disabled, expired, out of quota or whose user
 * is disabled stops within `maxAgeMs` on every replica (each asks the database itself).
 *
 * The database sees bounded load whatever the traffic:
 * - a key the authenticator holds costs nothing until its answer is three quarters of `maxAgeMs`
 *   old; then, while it is in use, it is renewed in the background;
 * - lookups are batched: one statement carries up to `batchSize` (500) keys; those a request waits for
 *   leave at the end of the event-loop turn, renewals wait up to `renewWindowMs` for company
 *   (1 s, or an eighth of `maxAgeMs` when that is shorter);
 * - at most `poolSize` statements run at once, and at most `maxQueued` keys wait: past that a
 *   lookup fails at once (the request gets 503 and Retry-After, as in an outage); a request waits
 *   at most `queryTimeoutMs` in all, queue included, and ANSWER_GRACE_MS more for an answer on its way.
 * Nothing here keeps a key: the queue holds a key's body only until its statement is sent.
 */
import type { Logger } from 'pino';
import type { KeySource, SourceAnswer } from '../authenticator.js';
import type { Clock } from '../../runtime/clock.js';
import type { RelayDbConfig } from '../../config/index.js';
import { sqliteModulePath } from './sqlite.js';
import { describeRelayDsn, type RelayDsn } from './dsn.js';
import { ANSWER_GRACE_MS, openDriver, withTimeout, type RelayDbDriver } from './driver.js';
import { privilegeProblem, probeStatement } from './privileges.js';
import { TurnBatch } from '../../runtime/turn-batch.js';
import { lookupKey } from '../keys.js';
import { couldBeRelayKey, judgeToken, type TokenRow } from './rules.js';
import { columnsStatement, detectSchema, tokenRow, tokensByKeyStatement, type RelaySchema, type SchemaShape } from './sql.js';

export interface RelayKeySourceOptions {
  dsn: RelayDsn;
  /** Force the schema instead of detecting it from the tables. */
  schema: RelaySchema | null;
  poolSize: number;
  queryTimeoutMs: number;
  /** Longest an answer is trusted (the bound on seeing a console change). */
  maxAgeMs: number;
  /** How long a key found here keeps working while the database cannot be reached. */
  staleMs: number;
  clock: Clock;
  log: Logger;
  /** Counts statements (op: lookup or schema; failed or not) and their time. */
  observe?: (op: 'lookup' | 'schema', seconds: number, failed: boolean) => void;
  /** Tests: supply the driver instead of opening one from the DSN. */
  driver?: RelayDbDriver;
  batchSize?: number;
  maxQueued?: number;
  renewWindowMs?: number;
  /** While the database cannot be reached, how often it is tried again with no traffic. */
  retryMs?: number;
}

export interface RelayDbHealth {
  /** `starting`: not reached yet since start; `ok`: the last statement succeeded; `failing`: it failed. */
  state: 'starting' | 'ok' | 'failing';
  /** Since when (clock ms) in this state. */
  since: number;
  /** What went wrong last, without secrets. */
  error: string | null;
  schema: RelaySchema | null;
  database: string;
}

/** Too many keys already wait for the database: the lookup is refused at once. */
export class RelayDbBusyError extends Error {
  override name = 'RelayDbBusyError';
  constructor() {
    super('too many key lookups are waiting for the relay database');
  }
}

interface Waiter {
  resolve: (row: TokenRow | null) => void;
  reject: (err: Error) => void;
}

/** The key source `relayDb.*` describes, or null when `relayDb.url` is unset. */
export function relayKeySourceFor(r: RelayDbConfig, clock: Clock, log: Logger, observe?: RelayKeySourceOptions['observe']): RelayKeySource | null {
  if (!r.dsn) return null;
  // A missing optional driver is a start-up error (exit 78), not a surprise on the first request.
  if (r.dsn.dialect === 'sqlite') sqliteModulePath('SLUICE_RELAY_DB');
  return new RelayKeySource({
    dsn: r.dsn,
    schema: r.schema === 'auto' ? null : r.schema,
    poolSize: r.poolSize,
    queryTimeoutMs: r.queryTimeoutMs,
    maxAgeMs: r.recheckSeconds * 1000,
    staleMs: r.staleSeconds * 1000,
    clock,
    log,
    observe,
  });
}

const RELAY_DB_DEFAULTS = Object.freeze({ batchSize: 500, maxQueued: 5000, renewWindowMs: 1000, retryMs: 5000 });

/** This source's name (KeySource.name): an outage of it is told apart from the store's (outcome relay_db_unavailable). */
export const RELAY_DB_SOURCE = 'relay-db';

export class RelayKeySource implements KeySource {
  readonly name = RELAY_DB_SOURCE;
  readonly maxAgeMs: number;
  readonly staleMs: number;
  private driver: RelayDbDriver | null;
  private opening: Promise<RelayDbDriver> | null = null;
  private shape: SchemaShape | null = null;
  private detecting: Promise<SchemaShape> | null = null;
  /** Keys waiting for a statement, by body; several requests presenting one key share one entry. */
  private queue = new Map<string, Waiter[]>();
  private running = 0;
  /**
   * Keys a request waits for leave at the end of this turn (src/runtime/turn-batch.ts). The batch
   * only says that a flush is due: the keys wait in `queue`, where requests presenting one key
   * share an entry and keys stay when every connection is busy, until a statement is free.
   */
  private readonly turn = new TurnBatch<void>(() => this.flush());
  /**
   * Renewals wait up to `renewWindowMs` for company instead: a timer, not a turn, because keys in
   * use age one by one and rarely reach renewal in the same turn; a window gathers many of them
   * into one statement, and no request waits for a renewal.
   */
  private windowFlush: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly batchSize: number;
  private readonly maxQueued: number;
  private readonly renewWindowMs: number;
  private readonly retryMs: number;
  private readonly status: RelayDbHealth;
  /** When (performance.now()) a statement last succeeded. */
  private lastOkAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: RelayKeySourceOptions) {
    this.maxAgeMs = o.maxAgeMs;
    this.staleMs = o.staleMs;
    this.driver = o.driver ?? null;
    this.batchSize = o.batchSize ?? RELAY_DB_DEFAULTS.batchSize;
    this.maxQueued = o.maxQueued ?? RELAY_DB_DEFAULTS.maxQueued;
    // A renewal starts at three quarters of the bound; waiting for company must leave it time to
    // finish inside the bound, whatever the bound is set to.
    this.renewWindowMs = o.renewWindowMs ?? Math.min(RELAY_DB_DEFAULTS.renewWindowMs, Math.floor(o.maxAgeMs / 8));
    this.retryMs = o.retryMs ?? RELAY_DB_DEFAULTS.retryMs;
    this.status = { state: 'starting', since: o.clock.now(), error: null, schema: null, database: describeRelayDsn(o.dsn) };
  }

  /** Connects and reads the schema now, and keeps trying in the background until it can. */
  start(): void {
    this.schemaShape().catch(() => {});
  }

  health(): Readonly<RelayDbHealth> {
    return this.status;
  }

  async find(key: string, hash: string, background: boolean): Promise<SourceAnswer> {
    const body = lookupKey(key);
    if (!couldBeRelayKey(body)) return 'unknown';
    // A request waits at most the query timeout, also when its key queued behind busy connections.
    const queued = this.enqueue(body, background);
    const row = background ? await queued : await this.answeredInTime(queued);
    // The database compared the key its own way (MySQL's usual collations ignore case); the
    // batch hands a row only to the body it equals exactly.
    if (row === null) return 'unknown';
    const verdict = judgeToken(row, Math.floor(this.o.clock.now() / 1000));
    // Why, and whose: the request's access line says it (src/auth/reasons.ts).
    if (!verdict.ok) return { reason: verdict.reason, id: row.id, user: row.userId };
    return { id: row.id, user: row.userId, hash };
  }

  /**
   * A request's lookup within the query timeout. A wait that runs out while no statement has
   * succeeded for as long is the database not answering (connections a silent server still holds
   * included): the health says so (readiness, sluice_relay_db_up) as the request's 503 does. With
   * statements still succeeding it is only a busy pool, and the health stays as it is.
   */
  private async answeredInTime(queued: Promise<TokenRow | null>): Promise<TokenRow | null> {
    let settled = false;
    try {
      return await withTimeout(
        queued.finally(() => (settled = true)),
        this.o.queryTimeoutMs + ANSWER_GRACE_MS,
        'a relay database lookup',
      );
    } catch (err) {
      // A statement's own failure was recorded where it ran; this is the wait that ran out.
      if (!settled && performance.now() - this.lastOkAt > this.o.queryTimeoutMs) this.failed(err);
      throw err;
    }
  }

  hurry(): void {
    if (this.queue.size > 0 && !this.closed) this.turn.add();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.turn.cancel();
    if (this.windowFlush) clearTimeout(this.windowFlush);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const err = new Error('sluice is shutting down');
    for (const ws of this.queue.values()) for (const w of ws) w.reject(err);
    this.queue.clear();
    const d = this.driver ?? (this.opening ? await this.opening.catch(() => null) : null);
    await d?.close().catch(() => {});
  }

  private enqueue(body: string, background: boolean): Promise<TokenRow | null> {
    if (this.closed) return Promise.reject(new Error('sluice is shutting down'));
    let waiters = this.queue.get(body);
    if (waiters === undefined) {
      if (this.queue.size >= this.maxQueued) return Promise.reject(new RelayDbBusyError());
      waiters = [];
      this.queue.set(body, waiters);
    }
    const answer = new Promise<TokenRow | null>((resolve, reject) => waiters.push({ resolve, reject }));
    if (!background) this.turn.add();
    else this.windowFlush ??= setTimeout(() => this.flush(), this.renewWindowMs);
    return answer;
  }

  /** Sends what waits, as statements of up to `batchSize` keys, while a connection is free. */
  private flush(): void {
    if (this.windowFlush) clearTimeout(this.windowFlush);
    this.windowFlush = null;
    while (this.queue.size > 0 && this.running < this.o.poolSize) {
      const batch = new Map<string, Waiter[]>();
      for (const [body, ws] of this.queue) {
        batch.set(body, ws);
        this.queue.delete(body);
        if (batch.size === this.batchSize) break;
      }
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        // Keys that queued behind a full pool have waited long enough: they go next.
        if (this.queue.size > 0 && !this.closed) this.turn.add();
      });
    }
  }

  private async run(batch: Map<string, Waiter[]>): Promise<void> {
    let rows: TokenRow[];
    try {
      const shape = await this.schemaShape();
      const driver = await this.connected();
      rows = (await this.timed('lookup', driver.query(tokensByKeyStatement(driver.dialect, shape, [...batch.keys()])))).map(tokenRow);
      this.succeeded();
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      for (const ws of batch.values()) for (const w of ws) w.reject(e);
      return;
    }
    const byKey = new Map<string, TokenRow>();
    // One row per key (the unique index); were there a deleted one beside a live one, the live one counts.
    for (const r of rows) if (!(r.deleted && byKey.has(r.key))) byKey.set(r.key, r);
    for (const [body, ws] of batch) {
      const row = byKey.get(body) ?? null;
      for (const w of ws) w.resolve(row);
    }
  }

  /** The schema, read once; until it could be read, every call tries again (one at a time). */
  private schemaShape(): Promise<SchemaShape> {
    if (this.shape) return Promise.resolve(this.shape);
    this.detecting ??= (async () => {
      const driver = await this.connected();
      const rows = await this.timed('schema', driver.query(columnsStatement(driver.dialect)));
      let shape: SchemaShape;
      try {
        shape = detectSchema(rows, this.o.schema);
      } catch (err) {
        // Tables or columns the user may not read are not listed either: a refused read says so.
        const problem = (await this.refusedRead(driver)) ?? err;
        this.failed(problem);
        throw problem;
      }
      this.shape = shape;
      this.status.schema = shape.schema;
      this.succeeded();
      this.o.log.info({ database: this.status.database, schema: shape.schema }, 'relay database: reading keys from it');
      return shape;
    })().finally(() => {
      this.detecting = null;
    });
    return this.detecting.catch((err: unknown) => {
      this.retryLater();
      throw err;
    });
  }

  /** Why the user may not read what the lookups read (privileges.ts), or null when it may (or the tables are not there). */
  private async refusedRead(driver: RelayDbDriver): Promise<Error | null> {
    for (const table of ['tokens', 'users'] as const) {
      try {
        await withTimeout(driver.query(probeStatement(driver.dialect, table)), this.o.queryTimeoutMs + ANSWER_GRACE_MS, 'a relay database statement');
      } catch (err) {
        const problem = privilegeProblem(err, this.o.dsn);
        if (problem !== null) return new Error(problem);
      }
    }
    return null;
  }

  private connected(): Promise<RelayDbDriver> {
    if (this.driver) return Promise.resolve(this.driver);
    this.opening ??= openDriver(this.o.dsn, { poolSize: this.o.poolSize, queryTimeoutMs: this.o.queryTimeoutMs }).then(
      (d) => (this.driver = d),
      (err: unknown) => {
        this.opening = null;
        this.failed(err);
        throw err;
      },
    );
    return this.opening;
  }

  /** Runs a statement within the query timeout, keeping metrics; a failure is recorded in the health. */
  private async timed<T>(op: 'lookup' | 'schema', work: Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      const r = await withTimeout(work, this.o.queryTimeoutMs + ANSWER_GRACE_MS, 'a relay database statement');
      this.o.observe?.(op, (performance.now() - start) / 1000, false);
      return r;
    } catch (err) {
      this.o.observe?.(op, (performance.now() - start) / 1000, true);
      this.failed(err);
      throw err;
    }
  }

  private succeeded(): void {
    this.lastOkAt = performance.now();
    if (this.status.state === 'ok') return;
    if (this.status.state === 'failing') this.o.log.info({ database: this.status.database }, 'relay database reachable again');
    this.status.state = 'ok';
    this.status.since = this.o.clock.now();
    this.status.error = null;
  }

  /** `starting` stays so until the database was reached once; after that a failure is `failing`. */
  private failed(err: unknown): void {
    // A refused read names the missing grant, not "unreachable".
    const message = privilegeProblem(err, this.o.dsn) ?? (err instanceof Error ? err.message : String(err));
    const changed = this.status.state === 'ok' || this.status.error !== message;
    if (this.status.state === 'ok') {
      this.status.state = 'failing';
      this.status.since = this.o.clock.now();
    }
    this.status.error = message;
    // One line per change of what is wrong, not one per failed lookup.
    if (changed)
      this.o.log.error(
        { database: this.status.database, err: message },
        'relay database unreachable or unusable: known keys keep working for the stale period, unknown keys get 503',
      );
    this.retryLater();
  }

  /** With no traffic, nothing would find out the database is back: try again on a timer. */
  private retryLater(): void {
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.closed || this.status.state === 'ok') return;
      const probe = this.shape
        ? this.connected().then(async (d) => {
            await this.timed('schema', d.query(columnsStatement(d.dialect)));
            this.succeeded();
          })
        : this.schemaShape();
      probe.catch(() => {});
    }, this.retryMs);
    this.retryTimer.unref();
  }
}
