/**
 * Free-tier limits (contract §8): per user, summed over every free model and
 * every protocol family; a rolling window and a calendar-day quota, decided in
 * one store round trip that counts only admitted calls.
 */
import type { Clock } from '../runtime/clock.js';
import type { FreeTierConfig } from '../config/index.js';
import type { LimitCheck, LimitState } from '../store/types.js';
import type { GuardedDecision, LimitStore } from './guard.js';
import { DayClock, type Day } from './day.js';
import { nextMember } from './member.js';
import { FREE_TIER_LIMIT, userSubject } from './names.js';
import { freeModelRule } from './model-fold.js';
import { pinnedChannelRule } from './pinned-channel.js';
import { refusalsFor, type Kept, type RememberRefusals, type RememberedRefusals } from './remembered.js';
import { resetSeconds, retryAfterSeconds } from './retry-after.js';

interface Usage {
  windowUsed: number;
  dayUsed: number;
  /** Seconds until the window is empty again / the day resets. */
  windowResetSeconds: number;
  dayResetSeconds: number;
}

/** `remembered`: a kept refusal answered it, without asking the store (limits.rememberRefusalsSeconds). */
export type FreeTierVerdict = ({ admitted: true } | { admitted: false; reason: 'day' | 'window'; retryAfterSeconds: number; remembered?: true }) & Usage;

export interface FreeTierState {
  user: string;
  window: { limit: number; windowSeconds: number; used: number; remaining: number; retryAfterSeconds: number; resetSeconds: number };
  day: { limit: number; timeZone: string; day: string; used: number; remaining: number; retryAfterSeconds: number; resetSeconds: number };
}

/**
 * What the store said when it last turned a user away, kept so that the user's retries before
 * anything can change are answered without a round trip. Instants are on the sidecar's clock.
 */
interface Refusal extends Kept {
  reason: 'day' | 'window';
  retryAt: number;
  dayUsed: number;
  windowUsed: number;
  dayResetAt: number;
  windowResetAt: number;
}

export class FreeTierLimiter {
  private readonly days: DayClock;
  /**
   * Whether a model id is free, as the relay's database may compare ids (case, trailing spaces,
   * accents, width: src/limits/model-fold.ts), so that no spelling the relay routes to a free
   * model escapes the count.
   */
  readonly isFree: (model: string) => boolean;
  /** Whether a call forwarded with this key is pinned to a channel counted as free (src/limits/pinned-channel.ts). */
  readonly pinsFreeChannel: (forwardedKey: string) => boolean;
  private policyFor: Day | null = null;
  private policy = '';
  /**
   * Refused users, whose retries are answered from memory while the store could only repeat
   * itself (the SDKs retry 429s). A reload builds a new limiter: it starts empty.
   */
  private readonly refusals: RememberedRefusals<Refusal>;

  constructor(
    readonly config: FreeTierConfig,
    private readonly store: LimitStore,
    private readonly clock: Clock,
    opts: RememberRefusals = {},
  ) {
    this.days = new DayClock(config.timeZone);
    this.isFree = freeModelRule(config);
    this.pinsFreeChannel = pinnedChannelRule(config.pinnedChannels);
    this.refusals = refusalsFor(opts);
  }

  /** The day check comes first so that, when both bind, the daily answer wins. */
  private checks(user: string, now: number): [LimitCheck, LimitCheck] {
    const day = this.days.dayAt(now);
    const subject = userSubject(user);
    return [
      { kind: 'counter', subject, key: `ft:d:${day.id}`, limit: this.config.perDay, resetAtMs: day.endsAt },
      { kind: 'window', subject, key: 'ft:w', limit: this.config.perMinute, windowMs: this.config.windowSeconds * 1000 },
    ];
  }

  /** Forgets every kept refusal (the store reconnected: it may have lost counts meanwhile). */
  forgetRefusals(): void {
    this.refusals.clear();
  }

  /** Forgets the refusal kept for `user` (their counts were reset, here or on another replica). */
  forget(user: string): void {
    this.refusals.delete(user);
  }

  /**
   * An operator's "unblock": deletes the user's counts (the rolling window and today's count) for
   * every replica, each of which then forgets the refusal it keeps for the user; answers the state
   * after.
   */
  async reset(user: string): Promise<FreeTierState> {
    const now = this.clock.now();
    await this.store.resetLimits(userSubject(user), this.checks(user, now), now);
    this.forget(user);
    return this.state(user);
  }

  async admit(user: string): Promise<FreeTierVerdict> {
    const now = this.clock.now();
    const r = this.refusals.get(user, now);
    if (r !== undefined) return refusalAt(r, now);
    const d = await this.store.consume(this.checks(user, now), now, nextMember(), FREE_TIER_LIMIT);
    return this.verdict(user, now, d);
  }

  private verdict(user: string, now: number, d: GuardedDecision): FreeTierVerdict {
    const dayUsed = d.used[0] ?? 0;
    const windowUsed = d.used[1] ?? 0;
    const dayResetSeconds = resetSeconds(d.resetMs[0] ?? 0);
    const windowResetSeconds = resetSeconds(d.resetMs[1] ?? 0);
    if (d.admitted) return { admitted: true, dayUsed, windowUsed, dayResetSeconds, windowResetSeconds };
    const reason = d.rejectedBy === 0 ? 'day' : 'window';
    const usage: Usage = { dayUsed, windowUsed, dayResetSeconds, windowResetSeconds };
    // A refusal taken by this replica alone during an outage is not the shared state: not kept.
    if (d.degraded !== true) this.keep(user, now, reason, d.retryAfterMs, usage, d.resetMs);
    return { admitted: false, reason, retryAfterSeconds: retryAfterSeconds(d.retryAfterMs), ...usage };
  }

  /**
   * Keeps a refusal for as long as the store's answer is certain not to change. Nothing is
   * counted while the user is refused, so their counts only move when a counted call leaves the
   * window (at its oldest call's time + window) or the day ends. A window refusal with exactly
   * `perMinute` calls in the window holds until its oldest call leaves, which is also when the
   * user gets in; with more (the limit was lowered since), older calls leave before that and
   * change the answer's fields, so it is not kept. A day refusal holds until the day ends, or
   * until the window's oldest call leaves, whichever comes first. Either way at most
   * `rememberRefusalsMs` (see RememberedRefusals).
   */
  private keep(user: string, now: number, reason: 'day' | 'window', retryAfterMs: number, usage: Usage, resetMs: number[]): void {
    const dayResetAt = now + (resetMs[0] ?? 0);
    const windowResetAt = now + (resetMs[1] ?? 0);
    let until: number;
    if (reason === 'window') {
      if (usage.windowUsed !== this.config.perMinute) return;
      until = Math.min(now + retryAfterMs, dayResetAt);
    } else {
      until = usage.windowUsed > 0 ? Math.min(dayResetAt, windowResetAt) : dayResetAt;
    }
    this.refusals.keep(user, { reason, until, retryAt: now + retryAfterMs, dayUsed: usage.dayUsed, windowUsed: usage.windowUsed, dayResetAt, windowResetAt }, now);
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
    return {
      user,
      window: {
        limit: c.perMinute,
        windowSeconds: c.windowSeconds,
        used: win.used,
        remaining: Math.max(0, c.perMinute - win.used),
        retryAfterSeconds: resetSeconds(win.retryAfterMs),
        resetSeconds: resetSeconds(win.resetMs),
      },
      day: {
        limit: c.perDay,
        timeZone: c.timeZone,
        day: this.days.dayAt(now).id,
        used: day.used,
        remaining: Math.max(0, c.perDay - day.used),
        retryAfterSeconds: resetSeconds(day.retryAfterMs),
        resetSeconds: resetSeconds(this.days.dayAt(now).endsAt - now),
      },
    };
  }
}

/** The verdict the store would give at `now` for a refusal kept by `keep`: same fields, same rounding. */
function refusalAt(r: Refusal, now: number): FreeTierVerdict {
  return {
    admitted: false,
    reason: r.reason,
    retryAfterSeconds: retryAfterSeconds(r.retryAt - now),
    remembered: true,
    dayUsed: r.dayUsed,
    windowUsed: r.windowUsed,
    dayResetSeconds: resetSeconds(r.dayResetAt - now),
    windowResetSeconds: r.windowUsed > 0 ? resetSeconds(r.windowResetAt - now) : 0,
  };
}
