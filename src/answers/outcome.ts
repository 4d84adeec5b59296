/**
 * What became of one public request: the one vocabulary the request path speaks. The gateway
 * records it, the body reader and the forwarder report in it, and operators see it as it is: the
 * `outcome` label of `sluice_requests_total` and the `decision` field of the access line. These
 * spellings are therefore part of sluice's interface (dashboards and alerts match on them), and
 * docs/operations.md's metrics table lists every one (test/docs.test.ts holds it to this list).
 *
 * Each refusal's outcome is its entry's in the refusal table (refusals.ts); the rest are here.
 */
import { Refusals, type RefusalOutcome } from './refusals.js';

/** Let through: the relay's answer reached the client whole. */
const ADMITTED = 'admitted';

/** How an exchange ends that sluice did not answer itself. */
const ENDINGS = [
  /** The relay went away in the middle of its answer. */
  'upstream_aborted',
  /**
   * sluice cut it: none of its answer's bytes moved for `upstream.idleTimeoutSeconds` (the relay
   * went silent, or the client stopped reading).
   */
  'answer_stalled',
  /** The client went away before its answer was whole. */
  'client_aborted',
  /** sluice cut it: still open when a drain's bound (drainSeconds) passed. */
  'drain_deadline',
] as const;

export type Outcome = typeof ADMITTED | RefusalOutcome | (typeof ENDINGS)[number];

export const OUTCOMES: readonly Outcome[] = Object.freeze([ADMITTED, ...new Set(Object.values(Refusals).map((r) => r.outcome)), ...ENDINGS]);
