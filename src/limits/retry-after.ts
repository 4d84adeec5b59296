/** Whole seconds a client must wait so that waiting exactly that long gets it in (never 0: a 429 always asks for a wait). */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Whole seconds until a count resets, for the `RateLimit` fields and the admin API (0: nothing to wait for). */
export function resetSeconds(ms: number): number {
  return Math.max(0, Math.ceil(ms / 1000));
}
