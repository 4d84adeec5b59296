import { describe, expect, it } from 'vitest';
import { atTurnEnd, TurnBatch } from './turn-batch.js';
import { nextTurn } from '../../test/support/time.js';

/** Resolves at the end of this turn, after the immediates set before it (they run in order). */

describe('TurnBatch', () => {
  it("hands one turn's items to the flush once, in order, after the turn's own work", async () => {
    const order: string[] = [];
    const flushes: number[][] = [];
    const batch = new TurnBatch<number>((items) => {
      flushes.push(items);
      order.push('flush');
    });
    batch.add(1);
    batch.add(2);
    queueMicrotask(() => {
      order.push('this turn');
      batch.add(3);
    });
    expect(flushes).toEqual([]);
    await nextTurn();
    expect(flushes).toEqual([[1, 2, 3]]);
    expect(order).toEqual(['this turn', 'flush']);
  });

  it('flushes the turn so far at once on flushNow, and not again at the turn’s end', async () => {
    const flushes: number[][] = [];
    const batch = new TurnBatch<number>((items) => flushes.push(items));
    batch.flushNow();
    batch.add(1);
    batch.add(2);
    batch.flushNow();
    expect(flushes).toEqual([[1, 2]]);
    batch.add(3);
    await nextTurn();
    await nextTurn();
    expect(flushes).toEqual([[1, 2], [3]]);
  });

  it('starts a new batch in the next turn, and flushes nothing for a turn that added nothing', async () => {
    const flushes: string[][] = [];
    const batch = new TurnBatch<string>((items) => flushes.push(items));
    batch.add('a');
    await nextTurn();
    await nextTurn();
    batch.add('b');
    await nextTurn();
    expect(flushes).toEqual([['a'], ['b']]);
  });

  it('takes items added during its own flush into the next turn, not the one being flushed', async () => {
    const flushes: number[][] = [];
    const batch = new TurnBatch<number>((items) => {
      flushes.push(items);
      if (items[0] === 1) batch.add(2);
    });
    batch.add(1);
    await nextTurn();
    await nextTurn();
    expect(flushes).toEqual([[1], [2]]);
  });

  it('cancel drops the batch unflushed and hands it back', async () => {
    const flushes: number[][] = [];
    const batch = new TurnBatch<number>((items) => flushes.push(items));
    batch.add(1);
    batch.add(2);
    expect(batch.cancel()).toEqual([1, 2]);
    await nextTurn();
    expect(flushes).toEqual([]);
  });
});

describe('atTurnEnd', () => {
  it("resumes everyone who waits in one turn together, after the turn's own work", async () => {
    const order: string[] = [];
    const both = Promise.all([atTurnEnd().then(() => order.push('turn end 1')), atTurnEnd().then(() => order.push('turn end 2'))]);
    queueMicrotask(() => order.push('this turn'));
    await both;
    expect(order).toEqual(['this turn', 'turn end 1', 'turn end 2']);
  });
});
