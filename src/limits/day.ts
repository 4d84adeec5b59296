/**
 * The calendar day in the configured zone (Asia/Shanghai by default), from the
 * sidecar's clock. Users in UTC+8 expect their quota back at their midnight,
 * not at UTC's.
 *
 * A day starts at the first instant whose local date is that day and ends where
 * the next day starts, so days tile the time line in every zone: one where DST
 * starts at 00:00 (midnight never happens; the day starts at 01:00 and the day
 * before is 24 h, not 23 h), one where DST ends at 01:00 (midnight happens
 * twice; the day starts at the first one and is 25 h), and one where DST ends
 * at 00:00 (23:00 of the day before happens twice; that day is 25 h).
 */

export interface Day {
  /** `YYYY-MM-DD` in the zone. */
  id: string;
  /** Epoch ms of the start of the next day (its first instant), the end of this one. */
  endsAt: number;
  /** Epoch ms of the first instant whose local date is this day. */
  startsAt: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(tz, f);
  }
  return f;
}

interface Parts {
  y: number;
  m: number;
  d: number;
  h: number;
  mi: number;
  s: number;
}

function parts(ms: number, tz: string): Parts {
  const p: Record<string, number> = {};
  for (const x of formatter(tz).formatToParts(ms)) if (x.type !== 'literal') p[x.type] = Number(x.value);
  return { y: p.year!, m: p.month!, d: p.day!, h: p.hour! % 24, mi: p.minute!, s: p.second! };
}

/** Zone offset (local − UTC) in ms at instant `ms`. */
function offsetAt(ms: number, tz: string): number {
  const p = parts(ms, tz);
  const asUtc = Date.UTC(p.y, p.m - 1, p.d, p.h, p.mi, p.s);
  return asUtc - (ms - (((ms % 1000) + 1000) % 1000));
}

/** The local date at `ms` as a comparable number, yyyymmdd. */
function dateKey(ms: number, tz: string): number {
  const p = parts(ms, tz);
  return p.y * 10_000 + p.m * 100 + p.d;
}

const HOUR = 3_600_000;

/**
 * The first instant whose local date is the given date or later: the start of
 * that day. Not simply local 00:00, which a DST change at midnight can skip
 * (the day then starts at 01:00) or repeat (the day starts at the first one).
 */
function dayStart(y: number, m: number, d: number, tz: string): number {
  const wall = Date.UTC(y, m - 1, d);
  const want = y * 10_000 + m * 100 + d;
  // Usual case, no offset change near midnight: 00:00 in the offset that holds there,
  // accepted only if it reads 00:00 of that date and the instant before is an earlier date.
  const guess = wall - offsetAt(wall - offsetAt(wall, tz), tz);
  const p = parts(guess, tz);
  if (p.y === y && p.m === m && p.d === d && p.h === 0 && p.mi === 0 && p.s === 0 && dateKey(guess - 1, tz) < want) return guess;
  // Otherwise search for the instant the local date reaches `want`. Offsets lie within
  // −12 h..+14 h, so 26 h either side of the wall time are an earlier date and a date at
  // least as late. Zone changes happen on whole seconds, so search seconds.
  let lo = (wall - 26 * HOUR) / 1000;
  let hi = (wall + 26 * HOUR) / 1000;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (dateKey(mid * 1000, tz) < want) lo = mid;
    else hi = mid;
  }
  return hi * 1000;
}

export class DayClock {
  private cached: Day | null = null;
  constructor(readonly timeZone: string) {
    formatter(timeZone);
  }

  /** The day containing `ms`; cached, since Intl formatting is slow and days are long. */
  dayAt(ms: number): Day {
    const c = this.cached;
    if (c && ms >= c.startsAt && ms < c.endsAt) return c;
    const p = parts(ms, this.timeZone);
    const startsAt = dayStart(p.y, p.m, p.d, this.timeZone);
    const next = new Date(Date.UTC(p.y, p.m - 1, p.d + 1));
    const endsAt = dayStart(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), this.timeZone);
    // `YYYY-MM-DD` of the local date.
    const day = { id: new Date(Date.UTC(p.y, p.m - 1, p.d)).toISOString().slice(0, 10), startsAt, endsAt };
    this.cached = day;
    return day;
  }
}
