/** The store could not answer and the configured policy is to fail closed. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
  constructor(override readonly cause: unknown) {
    super(`store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}
