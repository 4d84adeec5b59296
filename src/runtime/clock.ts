/**
 * The one clock of the process. Windows, the calendar day and cache ages are
 * all decided by the sidecar's clock (Redis only stores), so tests can move time.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
