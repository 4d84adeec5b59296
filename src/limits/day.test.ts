import { describe, expect, it } from 'vitest';
import { DayClock, type Day } from './day.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

/** The local date at `ms` in `tz`, `YYYY-MM-DD`, as Intl sees it: the reference. */
function localDate(ms: number, tz: string): string {
  const p: Record<string, string> = {};
  const f = new Intl.DateTimeFormat('en-US', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit' });
  for (const x of f.formatToParts(ms)) p[x.type] = x.value;
  return `${p.year}-${p.month}-${p.day}`;
}

/**
 * Every 2026 offset change of the zones under test (from the tz database), as UTC instants,
 * with the local dates whose length it changes. A zone without one is checked around dates
 * of the other zones' changes.
 */
const cases: Array<{ tz: string; at: string; note: string }> = [
  { tz: 'Asia/Shanghai', at: '2026-03-08T07:00:00Z', note: 'no DST' },
  { tz: 'Asia/Shanghai', at: '2026-12-31T16:00:00Z', note: 'no DST, year end' },
  { tz: 'UTC', at: '2026-03-08T07:00:00Z', note: 'no offset' },
  { tz: 'UTC', at: '2026-12-31T23:00:00Z', note: 'no offset, year end' },
  { tz: 'America/Santiago', at: '2026-04-05T03:00:00Z', note: 'DST ends at 00:00: 23:00 repeats' },
  { tz: 'America/Santiago', at: '2026-09-06T04:00:00Z', note: 'DST starts at 00:00: midnight skipped' },
  { tz: 'America/Havana', at: '2026-03-08T05:00:00Z', note: 'DST starts at 00:00: midnight skipped' },
  { tz: 'America/Havana', at: '2026-11-01T05:00:00Z', note: 'DST ends at 01:00: midnight twice' },
  { tz: 'Asia/Beirut', at: '2026-03-28T22:00:00Z', note: 'DST starts at 00:00: midnight skipped' },
  { tz: 'Asia/Beirut', at: '2026-10-24T21:00:00Z', note: 'DST ends at 00:00: 23:00 repeats' },
  { tz: 'Pacific/Auckland', at: '2026-04-04T14:00:00Z', note: 'DST ends at 03:00' },
  { tz: 'Pacific/Auckland', at: '2026-09-26T14:00:00Z', note: 'DST starts at 02:00' },
  { tz: 'America/New_York', at: '2026-03-08T07:00:00Z', note: 'DST starts at 02:00' },
  { tz: 'America/New_York', at: '2026-11-01T06:00:00Z', note: 'DST ends at 02:00' },
];

describe('DayClock', () => {
  for (const { tz, at, note } of cases) {
    it(`${tz} around ${at} (${note}): days contain their instants, carry their local date, and tile`, () => {
      const transition = Date.parse(at);
      // A fresh clock per sampling order: forward uses the per-day cache, the sparse pass misses it.
      const forward = new DayClock(tz);
      const seen = new Map<string, Day>();
      for (let t = transition - 3 * 24 * HOUR; t <= transition + 3 * 24 * HOUR; t += 15 * MIN) {
        for (const s of [t, t - 1]) {
          const d = forward.dayAt(s);
          expect(d.startsAt, `${new Date(s).toISOString()} starts`).toBeLessThanOrEqual(s);
          expect(d.endsAt, `${new Date(s).toISOString()} ends`).toBeGreaterThan(s);
          expect(d.id, new Date(s).toISOString()).toBe(localDate(s, tz));
          // The same day from a clock with nothing cached.
          expect(new DayClock(tz).dayAt(s)).toEqual(d);
          const prev = seen.get(d.id);
          if (prev) expect(d).toEqual(prev);
          else seen.set(d.id, d);
        }
      }
      const days = [...seen.values()].sort((a, b) => a.startsAt - b.startsAt);
      expect(days.length).toBeGreaterThanOrEqual(6);
      for (let i = 1; i < days.length; i++) expect(days[i]!.startsAt, days[i]!.id).toBe(days[i - 1]!.endsAt);
      for (const d of days) {
        // The start is the first instant of the day: the instant before is the day before.
        expect(localDate(d.startsAt, tz)).toBe(d.id);
        expect(localDate(d.startsAt - 1, tz)).not.toBe(d.id);
        expect(localDate(d.endsAt - 1, tz)).toBe(d.id);
        const hours = (d.endsAt - d.startsAt) / HOUR;
        expect([23, 24, 25]).toContain(hours);
      }
    });
  }

  it('gives the lengths and edges the zones define around their changes', () => {
    const day = (tz: string, iso: string) => {
      const d = new DayClock(tz).dayAt(Date.parse(iso));
      return { id: d.id, startsAt: new Date(d.startsAt).toISOString(), endsAt: new Date(d.endsAt).toISOString() };
    };
    // Santiago: 2026-09-06 00:00 never happens (00:00 -04 → 01:00 -03), so 09-05 is a full 24 h.
    expect(day('America/Santiago', '2026-09-06T03:30:00Z')).toEqual({ id: '2026-09-05', startsAt: '2026-09-05T04:00:00.000Z', endsAt: '2026-09-06T04:00:00.000Z' });
    expect(day('America/Santiago', '2026-09-06T04:00:00Z')).toEqual({ id: '2026-09-06', startsAt: '2026-09-06T04:00:00.000Z', endsAt: '2026-09-07T03:00:00.000Z' });
    // Santiago: 2026-04-04 23:00 happens twice (00:00 -03 → 23:00 -04), so 04-04 is 25 h.
    expect(day('America/Santiago', '2026-04-05T03:30:00Z')).toEqual({ id: '2026-04-04', startsAt: '2026-04-04T03:00:00.000Z', endsAt: '2026-04-05T04:00:00.000Z' });
    // Havana: 2026-03-08 starts at 01:00 -04; 2026-11-01 starts at its first 00:00 (-04) and is 25 h.
    expect(day('America/Havana', '2026-03-08T04:30:00Z')).toEqual({ id: '2026-03-07', startsAt: '2026-03-07T05:00:00.000Z', endsAt: '2026-03-08T05:00:00.000Z' });
    expect(day('America/Havana', '2026-11-01T04:30:00Z')).toEqual({ id: '2026-11-01', startsAt: '2026-11-01T04:00:00.000Z', endsAt: '2026-11-02T05:00:00.000Z' });
    // Beirut: 2026-03-29 starts at 01:00 +03.
    expect(day('Asia/Beirut', '2026-03-28T21:30:00Z')).toEqual({ id: '2026-03-28', startsAt: '2026-03-27T22:00:00.000Z', endsAt: '2026-03-28T22:00:00.000Z' });
  });

  it('caches the day it last computed', () => {
    const clock = new DayClock('Asia/Shanghai');
    const a = clock.dayAt(Date.parse('2026-05-01T00:00:00Z'));
    expect(clock.dayAt(Date.parse('2026-05-01T15:59:59.999Z'))).toBe(a);
    expect(clock.dayAt(Date.parse('2026-05-01T16:00:00Z')).id).toBe('2026-05-02');
  });
});
