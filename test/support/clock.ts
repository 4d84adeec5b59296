import type { Clock } from '../../src/runtime/clock.js';

/** A clock tests can move (src/runtime/clock.ts: every time decision reads the one Clock). */
export class ManualClock implements Clock {
  constructor(private ms: number = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
