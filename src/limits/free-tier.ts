/**
 * Free-tier limits (contract §8): per user, summed over every free model and
 * every protocol family; a rolling window and a calendar-day quota, decided in
 * one store round trip that counts only admitted calls.
 */
import type { Clock } from '../clock.js';
import type { FreeTierConfig } from '../config.js';
import type { LimitCheck, LimitState } from '../store/types.js';
import type { LimitStore } from './guard.js';
import { DayClock, type Day } from './day.js';
import { nextMember } from './member.js';

interface Usage {
  windowUsed: number;
  dayUsed: number;
  /** Seconds until the window is empty again / the day resets. */
  windowResetSeconds: number;
  dayResetSeconds: number;
}

export type FreeTierVerdict = ({ admitted: true } | { admitted: false; reason: 'day' | 'window'; retryAfterSeconds: number }) & Usage;

export interface FreeTierState {
  user: string;
  window: { limit: number; windowSeconds: number; used: number; remaining: number; retryAfterSeconds: number; resetSeconds: number };
  day: { limit: number; timeZone: string; day: string; used: number; remaining: number; retryAfterSeconds: number; resetSeconds: number };
}

/** Whole seconds a client must wait so that waiting exactly that long gets it in. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export class FreeTierLimiter {
  private readonly days: DayClock;
  private readonly models: ReadonlySet<string> | null;
  private policyFor: Day | null = null;
  private policy = '';

  constructor(
    readonly config: FreeTierConfig,
    private readonly store: LimitStore,
    private readonly clock: Clock,
  ) {
    this.days = new DayClock(config.timeZone);
    this.models = config.models ? new Set(config.models) : null;
  }

  isFree(model: string): boolean {
    return this.models ? this.models.has(model) : model.endsWith(this.config.modelSuffix);
  }

  /** The day check comes first so that, when both bind, the daily answer wins. */
  private checks(user: string, now: number): [LimitCheck, LimitCheck] {
    const day = this.days.dayAt(now);
    return [
      { kind: 'counter', key: `{u:${user}}:ft:d:${day.id}`, limit: this.config.perDay, resetAtMs: day.endsAt },
      { kind: 'window', key: `{u:${user}}:ft:w`, limit: this.config.perMinute, windowMs: this.config.windowSeconds * 1000 },
    ];
  }

  async admit(user: string): Promise<FreeTierVerdict> {
    const now = this.clock.now();
    const d = await this.store.consume(this.checks(user, now), now, nextMember(), 'free_tier');
    const usage: Usage = {
      dayUsed: d.used[0] ?? 0,
      windowUsed: d.used[1] ?? 0,
      dayResetSeconds: Math.max(0, Math.ceil((d.resetMs[0] ?? 0) / 1000)),
      windowResetSeconds: Math.max(0, Math.ceil((d.resetMs[1] ?? 0) / 1000)),
    };
    if (d.admitted) return { admitted: true, ...usage };
    return { admitted: false, reason: d.rejectedBy === 0 ? 'day' : 'window', retryAfterSeconds: retryAfterSeconds(d.retryAfterMs), ...usage };
  }

  /**
   * The IETF RateLimit-Policy / RateLimit fields (draft-ietf-httpapi-ratelimit-headers,
   * structured-field form) describing this user's free-tier state.
   */
  rateLimitFields(v: FreeTierVerdict): { policy: string; state: string } {
    const c = this.config;
    const day = this.days.dayAt(this.clock.now());
    // The policy only changes with the length of the day (DST zones): built once per day.
    if (this.policyFor !== day) {
      this.policyFor = day;
      this.policy = `"free-window";q=${c.perMinute};w=${c.windowSeconds}, "free-day";q=${c.perDay};w=${Math.round((day.endsAt - day.startsAt) / 1000)}`;
    }
    return {
      policy: this.policy,
      state: `"free-window";r=${Math.max(0, c.perMinute - v.windowUsed)};t=${v.windowResetSeconds}, "free-day";r=${Math.max(0, c.perDay - v.dayUsed)};t=${v.dayResetSeconds}`,
    };
  }

  async state(user: string): Promise<FreeTierState> {
    const now = this.clock.now();
    const [day, win] = (await this.store.inspect(this.checks(user, now), now)) as [LimitState, LimitState];
    const c = this.config;
    const secs = (ms: number): number => (ms <= 0 ? 0 : Math.ceil(ms / 1000));
    return {
      user,
      window: {
        limit: c.perMinute,
        windowSeconds: c.windowSeconds,
        used: win.used,
        remaining: Math.max(0, c.perMinute - win.used),
        retryAfterSeconds: secs(win.retryAfterMs),
        resetSeconds: secs(win.resetMs),
      },
      day: {
        limit: c.perDay,
        timeZone: c.timeZone,
        day: this.days.dayAt(now).id,
        used: day.used,
        remaining: Math.max(0, c.perDay - day.used),
        retryAfterSeconds: secs(day.retryAfterMs),
        resetSeconds: secs(this.days.dayAt(now).endsAt - now),
      },
    };
  }
}
