/**
 * The embedded store: the same semantics as the Redis store, in this process.
 * Only correct for a single replica; start-up warns about that.
 */
import { limitKey } from './limit-key.js';
import { DAY_KEY_GRACE_MS, type Decision, type KeyChange, type KeyRecord, type LimitCheck, type LimitsReset, type LimitState, type Store } from './types.js';

interface Counter {
  count: number;
  /**
   * When the count stops counting, fixed when the counter is made: the reset it was made
   * with plus DAY_KEY_GRACE_MS, as consume.lua sets the Redis key's expiry. The key names
   * the day, so this only bounds memory; the reset a caller sees is the one it passes.
   */
  expiresAt: number;
}

export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  private readonly byHash = new Map<string, KeyRecord>();
  private readonly byId = new Map<string, KeyRecord>();
  /** Admission times per window key, ascending. */
  private readonly windows = new Map<string, { windowMs: number; times: number[] }>();
  private readonly counters = new Map<string, Counter>();
  private readonly listeners: Array<(c: KeyChange) => void> = [];
  private readonly resetListeners: Array<(e: LimitsReset) => void> = [];
  private sweepAt = 0;

  async createKey(rec: KeyRecord): Promise<boolean> {
    if (this.byHash.has(rec.hash) || this.byId.has(rec.id)) return false;
    const copy = { ...rec };
    this.byHash.set(rec.hash, copy);
    this.byId.set(rec.id, copy);
    this.emit({ type: 'created', hash: rec.hash });
    return true;
  }

  async findKeyByHash(hash: string): Promise<KeyRecord | null> {
    const r = this.byHash.get(hash);
    return r ? { ...r } : null;
  }

  async deleteKey(id: string): Promise<KeyRecord | null> {
    const r = this.byId.get(id);
    if (!r) return null;
    this.byId.delete(id);
    this.byHash.delete(r.hash);
    this.emit({ type: 'deleted', hash: r.hash });
    return { ...r };
  }

  async listKeys(user: string): Promise<KeyRecord[]> {
    return [...this.byId.values()]
      .filter((r) => r.user === user)
      .map((r) => ({ ...r }))
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }

  onKeyChange(listener: (change: KeyChange) => void): void {
    this.listeners.push(listener);
  }

  /** In-process: there is no connection to lose. */
  onReconnect(_listener: () => void): void {}

  private emit(c: KeyChange): void {
    for (const l of this.listeners) l(c);
  }

  async consume(checks: readonly LimitCheck[], nowMs: number, _member: string): Promise<Decision> {
    return this.consumeSync(checks, nowMs);
  }

  /** Synchronous core, also used for the per-replica fallback during a Redis outage. */
  consumeSync(checks: readonly LimitCheck[], nowMs: number): Decision {
    this.sweep(nowMs);
    const keys = checks.map(limitKey);
    const states = checks.map((c, i) => this.stateAt(c, keys[i]!, nowMs, 'consume'));
    // Every check is evaluated first; the first that is full (in order) rejects.
    const rejectedBy = checks.findIndex((c, i) => states[i]!.used >= c.limit);
    if (rejectedBy >= 0) {
      return {
        admitted: false,
        rejectedBy,
        retryAfterMs: states[rejectedBy]!.retryAfterMs,
        used: states.map((s) => s.used),
        resetMs: states.map((s) => s.resetMs),
      };
    }
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i]!;
      const key = keys[i]!;
      if (c.kind === 'window') {
        const w = this.windows.get(key) ?? { windowMs: c.windowMs, times: [] };
        w.windowMs = c.windowMs;
        // Keep ascending order even if the caller's clock stepped back.
        let j = w.times.length;
        while (j > 0 && w.times[j - 1]! > nowMs) j--;
        w.times.splice(j, 0, nowMs);
        this.windows.set(key, w);
      } else {
        const cur = this.counters.get(key);
        if (cur && cur.expiresAt > nowMs) cur.count++;
        else this.counters.set(key, { count: 1, expiresAt: Math.max(c.resetAtMs, nowMs) + DAY_KEY_GRACE_MS });
      }
    }
    return {
      admitted: true,
      used: states.map((s) => s.used + 1),
      // This call is now in every window, so a window empties no later than a full window from
      // now; a counter's reset does not move.
      resetMs: checks.map((c, i) => (c.kind === 'window' ? (states[i]!.used === 0 ? c.windowMs : Math.min(states[i]!.resetMs, c.windowMs)) : states[i]!.resetMs)),
    };
  }

  async inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    return checks.map((c) => this.stateAt(c, limitKey(c), nowMs, 'inspect'));
  }

  /** The counts `checks` name go, as in Redis (limit-resets.ts), and the listeners hear of it at once. */
  async resetLimits(subject: string, checks: readonly LimitCheck[], _nowMs: number): Promise<void> {
    for (const c of checks) {
      const key = limitKey(c);
      this.windows.delete(key);
      this.counters.delete(key);
    }
    for (const l of this.resetListeners) l({ type: 'reset', subject });
  }

  onLimitsReset(listener: (e: LimitsReset) => void): void {
    this.resetListeners.push(listener);
  }

  /** Drops every count of `subject` (the per-replica outage counts of src/limits/guard.ts too). */
  forgetSubject(subject: string): void {
    const tag = `{${subject}}:`;
    for (const k of this.windows.keys()) if (k.startsWith(tag)) this.windows.delete(k);
    for (const k of this.counters.keys()) if (k.startsWith(tag)) this.counters.delete(k);
  }

  /**
   * One check (kept under `key`) at `nowMs`, as the Lua scripts compute it: the calls it counts (a window
   * trimmed to now); the wait until it admits one more (0 while it does; for a window, until
   * the call that must leave before one more fits has left); and the wait until it is empty
   * again (0 when it is). A counter's waits run to the `resetAtMs` of this call's check,
   * whatever reset its stored count was made with. For `consume`, a counter reports its
   * reset even when empty, as consume.lua's resetOf does; inspect.lua reports 0.
   */
  private stateAt(c: LimitCheck, key: string, nowMs: number, mode: 'consume' | 'inspect'): LimitState {
    if (c.kind === 'window') {
      const times = this.trimmed(key, c.windowMs, nowMs);
      const n = times.length;
      return {
        used: n,
        retryAfterMs: n >= c.limit ? times[n - c.limit]! + c.windowMs - nowMs : 0,
        resetMs: n > 0 ? times[0]! + c.windowMs - nowMs : 0,
      };
    }
    const n = this.counterValue(key, nowMs);
    const untilReset = c.resetAtMs - nowMs;
    return { used: n, retryAfterMs: n >= c.limit ? untilReset : 0, resetMs: n > 0 || mode === 'consume' ? untilReset : 0 };
  }

  /** Drops entries that left the window (a call at exactly now - window has left). */
  private trimmed(key: string, windowMs: number, nowMs: number): number[] {
    const times = this.windows.get(key)?.times;
    if (!times) return [];
    const edge = nowMs - windowMs;
    let k = 0;
    while (k < times.length && times[k]! <= edge) k++;
    if (k > 0) times.splice(0, k);
    if (times.length === 0) this.windows.delete(key);
    return times;
  }

  /** The count of a counter that has not expired (as a Redis key would); only the sweep deletes. */
  private counterValue(key: string, nowMs: number): number {
    const c = this.counters.get(key);
    return c && c.expiresAt > nowMs ? c.count : 0;
  }

  /** Bounds memory: forgets empty windows and expired counters now and then. */
  private sweep(nowMs: number): void {
    if (nowMs < this.sweepAt) return;
    this.sweepAt = nowMs + 60_000;
    for (const [k, c] of this.counters) if (c.expiresAt <= nowMs) this.counters.delete(k);
    // Windows are trimmed lazily on use; forget those whose newest call has left the window.
    for (const [k, w] of this.windows) if (w.times.length === 0 || w.times[w.times.length - 1]! <= nowMs - w.windowMs) this.windows.delete(k);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.listeners.length = 0;
    this.resetListeners.length = 0;
  }
}
