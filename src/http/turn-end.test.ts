import { describe, expect, it } from 'vitest';
import { atTurnEnd } from './turn-end.js';

describe('atTurnEnd', () => {
  it("gives everyone who waits in one turn the same moment, after the turn's own work, and a new one in the next turn", async () => {
    const order: string[] = [];
    const first = atTurnEnd();
    expect(atTurnEnd()).toBe(first);
    const both = Promise.all([first.then(() => order.push('turn end')), first.then(() => order.push('turn end'))]);
    queueMicrotask(() => order.push('this turn'));
    await both;
    expect(order).toEqual(['this turn', 'turn end', 'turn end']);
    const next = atTurnEnd();
    expect(next).not.toBe(first);
    await next;
  });
});
