/**
 * The suite's one way to wait: `sleep` for a fixed pause, `eventually` for "until this holds".
 * Tests import these rather than writing their own loops, so every wait is bounded and every
 * timeout says what it waited for and how it last failed.
 */

/** Resolves after `ms` milliseconds (the global `setTimeout`: fake timers, where a test installs them, apply). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Resolves once this event-loop turn has ended: after the check phase, where a TurnBatch's flush
 * (src/runtime/turn-batch.ts) runs, so what the turn batched has been handled.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `p`'s value, or null if it takes longer than `ms` (a rejection passes through). */
export function within<T>(ms: number, p: Promise<T>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))]).finally(() => clearTimeout(timer));
}

export interface EventuallyOptions {
  /** Give up after this long; default 5 s. */
  timeoutMs?: number;
  /** Pause between tries; default 50 ms. */
  intervalMs?: number;
  /** What is awaited, for the timeout's message: "timed out ... waiting for <what>" ("the replica to sync"). */
  what?: string;
}

/** Thrown inside an `eventually` check: stop trying at once and fail with this error (a child process exited, say). */
export class GiveUp extends Error {
  override name = 'GiveUp';
}

/**
 * Calls `check` until it passes, and returns what it returned. It passes when it neither throws
 * (an `expect` inside it, say) nor returns `false` (a predicate); each try awaits the last, then
 * pauses `intervalMs`. At `timeoutMs` it throws: the last error, its message prefixed with how
 * long it waited and for what (an assertion keeps its expected and actual), or, for a predicate
 * that stayed false, an error saying so. A `GiveUp` thrown by `check` ends it at once.
 */
export async function eventually<T>(check: () => T | Promise<T>, options: EventuallyOptions = {}): Promise<Exclude<T, false>> {
  const { timeoutMs = 5_000, intervalMs = 50, what = 'the check to pass' } = options;
  const started = Date.now();
  let tries = 0;
  for (;;) {
    tries++;
    let failure: unknown;
    try {
      const value = await check();
      if (value !== false) return value as Exclude<T, false>;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      failure = err;
    }
    const elapsed = Date.now() - started;
    if (elapsed >= timeoutMs) {
      const prefix = `timed out after ${timeoutMs} ms (${tries} tries) waiting for ${what}`;
      if (failure instanceof Error) {
        failure.message = `${prefix}: ${failure.message}`;
        throw failure;
      }
      throw new Error(failure === undefined ? `${prefix}: it was still false` : `${prefix}: ${String(failure)}`);
    }
    await sleep(Math.min(intervalMs, timeoutMs - elapsed));
  }
}
