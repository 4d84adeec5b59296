/**
 * Whether the store answers, asked with a PING every second (each bounded by
 * `redis.commandTimeoutMs`), for `/readyz`'s body, the `sluice_store_up` gauge and the replay of
 * what was counted in memory during an outage. Not for readiness itself once the store has
 * answered: every replica shares the store, so an outage would take them all out of the Service
 * at once, while they still serve (docs/operations.md, Probes).
 */
import type { Logger } from 'pino';
import type { Store } from './types.js';

/** How often the store is asked whether it answers. */
const STORE_PROBE_MS = 1000;

/** The longest error text kept (and shown in /readyz). */
const MAX_ERROR_CHARS = 200;

export interface StoreHealthState {
  /**
   * `starting`: not answered yet since start (failures meanwhile only set `error`); `ok`: the last
   * PING was answered; `failing`: it was not, after the store had answered once.
   */
  state: 'starting' | 'ok' | 'failing';
  /** Since when (clock ms) in this state. */
  since: number;
  /** Why the last PING failed, or null. */
  error: string | null;
}

export class StoreHealth {
  private readonly status: StoreHealthState;
  private timer: NodeJS.Timeout | null = null;
  private probing: Promise<void> | null = null;
  private stopped = false;
  private readonly answered: Array<() => void> = [];

  constructor(
    private readonly store: Store,
    private readonly now: () => number,
    private readonly log: Logger,
  ) {
    // The embedded store lives in this process: it always answers.
    this.status = { state: store.kind === 'memory' ? 'ok' : 'starting', since: now(), error: null };
  }

  get(): Readonly<StoreHealthState> {
    return this.status;
  }

  /** Calls `listener` after each PING the store answered. */
  onAnswer(listener: () => void): void {
    this.answered.push(listener);
  }

  /** Asks now, then every STORE_PROBE_MS. */
  start(): void {
    if (this.store.kind === 'memory' || this.timer !== null) return;
    void this.probe();
    this.timer = setInterval(() => void this.probe(), STORE_PROBE_MS);
    this.timer.unref();
  }

  /** Stops asking; an answer still on its way is not recorded (the store is closing). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** One PING (joined if one is out); resolves once its answer, or its failure, is recorded. */
  probe(): Promise<void> {
    if (this.store.kind === 'memory') return Promise.resolve();
    this.probing ??= this.store.ping().then(
      () => {
        this.probing = null;
        this.set('ok', null);
        if (!this.stopped) for (const l of this.answered) l();
      },
      (err: unknown) => {
        this.probing = null;
        this.set('failing', (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_CHARS));
      },
    );
    return this.probing;
  }

  private set(state: 'ok' | 'failing', error: string | null): void {
    if (this.stopped) return;
    const s = this.status;
    if (state === 'failing' && s.state === 'starting') {
      if (s.error === null) this.log.warn({ err: error }, 'store (Redis) not reached yet: this replica is not ready until it answers');
    } else if (s.state !== state) {
      if (state === 'failing') {
        this.log.error({ err: error }, 'store (Redis) does not answer: limits follow limits.onStoreError; readiness stays as it is (alert on sluice_store_up)');
      } else {
        this.log.info({ downSeconds: s.state === 'failing' ? Math.round((this.now() - s.since) / 1000) : undefined }, 'store (Redis) answers');
      }
      s.state = state;
      s.since = this.now();
    }
    s.error = error;
  }
}
