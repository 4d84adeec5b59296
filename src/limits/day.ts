/**
 * The calendar day in the configured zone (Asia/Shanghai by default), from the
 * sidecar's clock. Users in UTC+8 expect their quota back at their midnight,
 * not at UTC's. Works for zones with DST too.
 */

export interface Day {
  /** `YYYY-MM-DD` in the zone. */
  id: string;
  /** Epoch ms of the next 00:00 in the zone. */
  endsAt: number;
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

/** The instant of local midnight starting the given local date. */
function localMidnight(y: number, m: number, d: number, tz: string): number {
  const wall = Date.UTC(y, m - 1, d);
  let guess = wall - offsetAt(wall, tz);
  // One correction handles an offset change between the guess and midnight.
  guess = wall - offsetAt(guess, tz);
  return guess;
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

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
    const startsAt = localMidnight(p.y, p.m, p.d, this.timeZone);
    const next = new Date(Date.UTC(p.y, p.m - 1, p.d + 1));
    const endsAt = localMidnight(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), this.timeZone);
    const day = { id: `${pad(p.y, 4)}-${pad(p.m)}-${pad(p.d)}`, startsAt, endsAt };
    this.cached = day;
    return day;
  }
}
