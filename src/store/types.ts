/**
 * The narrow interface between the request path and shared state. Two
 * implementations: Redis (many replicas behave as one) and an embedded
 * in-process store (one replica). Both must give identical answers; the same
 * behaviour suite runs against each.
 */

export interface KeyRecord {
  id: string;
  user: string;
  name: string;
  createdAt: string;
  /** SHA-256 of the key's lookupKey (src/auth/keys.ts: without `sk-` and any `-suffix`), hex. The key itself is never stored. */
  hash: string;
}

/** What every limit check names: whose calls it counts, and which count of theirs. */
interface CheckKey {
  /**
   * Whose calls the check counts (`u:<user>`, `ip:<address>`). The checks of one decision name
   * one subject, and the store keeps every count of a subject together (src/store/limit-key.ts):
   * on a Redis Cluster, where one script may only touch keys of one slot.
   */
  subject?: string;
  /** Which of the subject's counts (`ft:w`, a rule's name), unique per subject. */
  key: string;
}

/** A rolling window: at most `limit` admitted in any `windowMs`. */
export interface WindowCheck extends CheckKey {
  kind: 'window';
  limit: number;
  windowMs: number;
}

/**
 * How long a day counter outlives the end of its day (27 h), in both stores: consume.lua's expiry
 * past the day's end (src/store/redis/lua/), the point the memory store's reads stop seeing a
 * count. The key names the day, so this only bounds memory; but a reload to another time zone can
 * end "the same" day up to 26 h later, and the count must not vanish before then.
 */
export const DAY_KEY_GRACE_MS = 27 * 3_600_000;

/** A counter that resets at a fixed instant (the calendar day). */
export interface CounterCheck extends CheckKey {
  kind: 'counter';
  limit: number;
  resetAtMs: number;
}

export type LimitCheck = WindowCheck | CounterCheck;

/**
 * `used[i]`: calls counted by check i after this decision; `resetMs[i]`: ms
 * until check i is empty again (its oldest call leaves the window, or the
 * counter resets).
 */
export type Decision =
  | { admitted: true; used: number[]; resetMs: number[] }
  /** `rejectedBy` indexes the first check that failed; checks are evaluated in order. */
  | { admitted: false; rejectedBy: number; retryAfterMs: number; used: number[]; resetMs: number[] };

export interface LimitState {
  used: number;
  /** Milliseconds until one more call would be admitted by this check alone (0 when it would be now). */
  retryAfterMs: number;
  /** Milliseconds until the oldest counted call leaves the window / the counter resets (0 when empty). */
  resetMs: number;
}

export type KeyChange = { type: 'deleted' | 'created'; hash: string } | { type: 'flush' };

/**
 * A call admitted by this replica alone while the store could not take its decision
 * (`limits.onStoreError: open`), kept so that the store counts it once it answers again.
 */
export interface OutageAdmission {
  checks: readonly LimitCheck[];
  nowMs: number;
  /** The decision's member (unique per call): the store recognises a call it already counted by it. */
  member: string;
  /**
   * Whether the store may have counted it after all: its decision was sent and no answer came
   * (a timeout, a connection lost mid-command), so it may have run, or may still run, in the
   * store. False when it was never sent (no connection).
   */
  maybeCounted: boolean;
}

/**
 * What became of an outage admission handed to the store: `replayed` (now counted),
 * `already_counted` (the store had it: its own decision ran after all, or an earlier replay did),
 * `expired` (its windows and day are over: nothing left to count), `reset` (an operator reset its
 * subject's limits after it was admitted: not counted), `unknown` (its decision may
 * have run and no trace of it is left to tell: not counted, so as never to count it twice),
 * `failed` (its own data is bad, e.g. a key of the wrong type), `retry` (the store did not
 * answer: try again later).
 */
export type ReplayOutcome = 'replayed' | 'already_counted' | 'expired' | 'reset' | 'unknown' | 'failed' | 'retry';

/** The store was not asked (no connection to send on): nothing was counted. */
export class NotSentError extends Error {
  override name = 'NotSentError';
}

/**
 * An operator reset a subject's limits (`u:<user>`, `ip:<bucket>`) on some replica; `flush`: resets
 * may have been missed (the feed reconnected), so every subject's kept state is suspect.
 */
export type LimitsReset = { type: 'reset'; subject: string } | { type: 'flush' };

export interface Store {
  readonly kind: 'redis' | 'memory';

  /** Stores a new key; false when a key with the same hash already exists. */
  createKey(rec: KeyRecord): Promise<boolean>;
  findKeyByHash(hash: string): Promise<KeyRecord | null>;
  /** Removes a key by id and tells every replica; the removed record, or null for an unknown id. */
  deleteKey(id: string): Promise<KeyRecord | null>;
  listKeys(user: string): Promise<KeyRecord[]>;
  /** Changes to the key set made anywhere (this replica or another), for cache invalidation. */
  onKeyChange(listener: (change: KeyChange) => void): void;
  /**
   * The connection that takes decisions came back after a break, or came up at last after failing
   * to at start-up: what the store holds may have changed meanwhile (a Redis restarted without
   * persistence, a failover to a replica that lagged), and calls were decided without it.
   * The embedded store never breaks, so never calls it.
   */
  onReconnect(listener: () => void): void;

  /**
   * Checks every limit and counts the call in all of them only if all pass,
   * atomically. `member` is a unique id of this call (non-empty, without white space).
   */
  consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision>;
  /** The state of each limit now, without counting anything. */
  inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]>;
  /**
   * Deletes the counts of `checks`, all of `subject`, and tells every replica (this one included)
   * through onLimitsReset, so that each forgets what it remembers of the subject.
   */
  /**
   * Deletes the counts `checks` name and announces the reset. `nowMs` is kept beside them: a call
   * admitted in memory before it, by a replica that heard of no reset (cut off from the store),
   * is not added when that replica replays it.
   */
  resetLimits(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void>;
  /** Limit resets made anywhere (this replica or another). */
  onLimitsReset(listener: (e: LimitsReset) => void): void;

  /** Resolves when the store answers now; rejects with the reason it does not. */
  ping(): Promise<void>;
  /**
   * Adds calls admitted during an outage to the store's counts, each at its own time, at most
   * once whatever happened before (see OutageAdmission); one outcome per admission, in order.
   * Only a store that can be unreachable has it (the embedded store never is).
   */
  replayAdmissions?(admissions: readonly OutageAdmission[], nowMs: number): Promise<ReplayOutcome[]>;
  close(): Promise<void>;
}
