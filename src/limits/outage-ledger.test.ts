import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Metrics } from '../metrics/index.js';
import { MemoryStore } from '../store/memory.js';
import type { LimitCheck, OutageAdmission, ReplayOutcome, Store } from '../store/types.js';
import { MAX_OUTAGE_ADMISSIONS, OutageLedger } from './outage-ledger.js';

const window: LimitCheck[] = [{ kind: 'window', key: 'w', limit: 20, windowMs: 60_000 }];
const at = (nowMs: number, member: string): OutageAdmission => ({ checks: window, nowMs, member, maybeCounted: false });

/** A store that answers each replay with `answer` (per admission), and records what it was handed. */
function replayingStore(answer: (a: OutageAdmission) => ReplayOutcome): Store & { handed: string[] } {
  const s = new MemoryStore() as unknown as Store & { handed: string[] };
  s.handed = [];
  s.replayAdmissions = async (admissions) => {
    s.handed.push(...admissions.map((a) => a.member));
    return admissions.map(answer);
  };
  return s;
}

function logLines(): { log: pino.Logger; lines: Array<{ msg: string } & Record<string, unknown>> } {
  const lines: Array<{ msg: string } & Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg: string }) });
  return { log, lines };
}

const results = async (m: Metrics) => Object.fromEntries((await m.outageReplays.get()).values.filter((v) => v.value > 0).map((v) => [v.labels.result, v.value]));

describe('OutageLedger', () => {
  afterEach(() => vi.useRealTimers());

  it("lets go of a reset subject's admissions while a chunk is out, and of no other subject's", async () => {
    const alice: LimitCheck[] = [{ kind: 'window', subject: 'u:alice', key: 'w', limit: 20, windowMs: 60_000 }];
    const bob: LimitCheck[] = [{ kind: 'window', subject: 'u:bob', key: 'w', limit: 20, windowMs: 60_000 }];
    const handed: string[] = [];
    let ledger: OutageLedger | undefined;
    const s = new MemoryStore() as unknown as Store;
    s.replayAdmissions = async (admissions) => {
      handed.push(...admissions.map((a) => a.member));
      // An operator resets alice while the first chunk (1,024) is out.
      if (handed.length === admissions.length) ledger!.forget('u:alice');
      return admissions.map((a) => (a.member.startsWith('alice') ? 'retry' : 'replayed'));
    };
    ledger = new OutageLedger(s, new Metrics({ processMetrics: false }), pino({ level: 'silent' }), () => 1000);
    for (let i = 0; i < 1020; i++) ledger.record({ checks: bob, nowMs: 900, member: `bob${i}`, maybeCounted: false });
    for (let i = 0; i < 10; i++) ledger.record({ checks: alice, nowMs: 900, member: `alice${i}`, maybeCounted: false });
    await ledger.replay();
    // Every bob call was handed over; alice's first four, sent before the reset and left to retry, are not kept.
    expect(handed.filter((m) => m.startsWith('bob')).length).toBe(1020);
    expect(ledger.size).toBe(0);
  });

  it('hands every waiting admission to the store once, keeps those it did not answer for a replay a second later, and logs the outcome when none is left', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    let down = true;
    const store = replayingStore((a) => (down && a.member === 'b' ? 'retry' : 'replayed'));
    const metrics = new Metrics({ processMetrics: false });
    const { log, lines } = logLines();
    const ledger = new OutageLedger(store, metrics, log, () => 1000);
    for (const m of ['a', 'b', 'c']) ledger.record(at(900, m));
    await ledger.replay();
    expect(store.handed).toEqual(['a', 'b', 'c']);
    expect(ledger.size).toBe(1);
    expect(lines.some((l) => l.msg.includes('added to the shared counts'))).toBe(false);
    down = false;
    await ledger.replay(); // too soon: a store that just failed is not asked again at once
    expect(store.handed).toEqual(['a', 'b', 'c']);
    vi.advanceTimersByTime(1000);
    await ledger.replay();
    expect(store.handed).toEqual(['a', 'b', 'c', 'b']);
    expect(ledger.size).toBe(0);
    expect(await results(metrics)).toEqual({ replayed: 3 });
    expect(lines.find((l) => l.msg.includes('added to the shared counts'))).toMatchObject({ replayed: 3, dropped: 0 });
  });

  it(`keeps at most ${MAX_OUTAGE_ADMISSIONS}: past that, calls with nothing left to count go first, then new ones are dropped, counted and logged once`, async () => {
    const store = replayingStore(() => 'replayed');
    const metrics = new Metrics({ processMetrics: false });
    const { log, lines } = logLines();
    let now = 100_000;
    const ledger = new OutageLedger(store, metrics, log, () => now);
    for (let i = 0; i < MAX_OUTAGE_ADMISSIONS; i++) ledger.record(at(i < 10 ? 0 : now, `m${i}`));
    // The first ten left their window (60 s) long ago: they make room.
    for (let i = 0; i < 12; i++) ledger.record(at(now, `late${i}`));
    expect(ledger.size).toBe(MAX_OUTAGE_ADMISSIONS);
    expect(await results(metrics)).toEqual({ expired: 10, dropped: 2 });
    expect(lines.filter((l) => l.msg.includes('too many calls admitted in memory'))).toHaveLength(1);
    now += 1000;
    await ledger.replay();
    expect(ledger.size).toBe(0);
    expect(store.handed).toHaveLength(MAX_OUTAGE_ADMISSIONS);
    expect(store.handed.at(-1)).toBe('late9');
  });

  it('keeps nothing for a store that never needs a replay (the embedded store)', async () => {
    const ledger = new OutageLedger(new MemoryStore(), new Metrics({ processMetrics: false }), pino({ level: 'silent' }), () => 0);
    ledger.record(at(0, 'x'));
    expect(ledger.size).toBe(0);
  });
  it("forgets a subject's waiting admissions when its limits are reset: a later replay does not bring its counts back", async () => {
    const store = replayingStore(() => 'replayed');
    const ledger = new OutageLedger(store, new Metrics({ processMetrics: false }), logLines().log, () => 1000);
    const of = (subject: string, member: string): OutageAdmission => ({ checks: window.map((c) => ({ ...c, subject })), nowMs: 900, member, maybeCounted: false });
    ledger.record(of('u:alice', 'a1'));
    ledger.record(of('u:bob', 'b1'));
    ledger.record(of('u:alice', 'a2'));
    ledger.forget('u:alice');
    await ledger.replay();
    expect(store.handed).toEqual(['b1']);
  });
});
