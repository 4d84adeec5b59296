/**
 * What became of one public request: the one vocabulary the request path speaks. The gateway
 * records it, the body reader and the forwarder report in it, and operators see it as it is: the
 * `outcome` label of `sluice_requests_total` and the `decision` field of the access line. These
 * spellings are therefore part of sluice's interface (dashboards and alerts match on them).
 */
export const OUTCOMES = [
  /** Let through: the relay's answer reached the client whole. */
  'admitted',
  'unauthorized',
  'ip_limited',
  'free_tier_minute',
  'free_tier_day',
  /** The relay's 429 on an admitted free call: its own upstream free tier is busy. */
  'free_tier_upstream',
  /** The relay's own bare per-address 429 on a query endpoint, answered with Retry-After. */
  'relay_ip_limited',
  'too_large',
  'bad_request',
  /** The bodies in flight could not hold this one (bodyBudgetBytes). */
  'busy',
  'request_timeout',
  /** The key store (Redis) could not be asked and the key was not seen recently, or a limit needed it (limits.onStoreError: closed); or unknown keys at their lookup ceiling. 503. */
  'store_unavailable',
  /** The relay's database could not be asked and the key was not seen recently. The same 503 as store_unavailable. */
  'relay_db_unavailable',
  /** The relay could not be reached (502). */
  'upstream_error',
  /** The relay's response headers did not come within upstream.headersTimeoutSeconds (504). */
  'upstream_timeout',
  /** No descriptor left to open a relay connection with (503). */
  'out_of_sockets',
  /** The relay went away in the middle of its answer. */
  'upstream_aborted',
  /** The client went away before its answer was whole. */
  'client_aborted',
  /** sluice cut it: still open when a drain's bound (drainSeconds) passed. */
  'drain_deadline',
  'internal_error',
] as const;

export type Outcome = (typeof OUTCOMES)[number];
