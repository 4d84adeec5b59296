import type { LimitStore } from '../../src/limits/guard.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { Decision, LimitCheck, LimitState } from '../../src/store/types.js';

/** A limit store (the in-process one by default) that counts how often it is asked to decide. */
export class CountingStore implements LimitStore {
  asked = 0;
  constructor(
    readonly inner: Pick<LimitStore, 'inspect' | 'resetLimits'> & { consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision> } = new MemoryStore(),
  ) {}
  consume(checks: readonly LimitCheck[], nowMs: number, member: string): Promise<Decision> {
    this.asked++;
    return this.inner.consume(checks, nowMs, member);
  }
  inspect(checks: readonly LimitCheck[], nowMs: number): Promise<LimitState[]> {
    return this.inner.inspect(checks, nowMs);
  }
  resetLimits(subject: string, checks: readonly LimitCheck[], nowMs: number): Promise<void> {
    return this.inner.resetLimits(subject, checks, nowMs);
  }
}
