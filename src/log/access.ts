/**
 * The access line: one JSON line per request, at info, with the record's fields and `msg:
 * "request"`. On sluice's own logger its fields, a fixed set, are serialized by one JSON.stringify
 * and written by the logger's InfoLine: the same line, byte for byte, as `log.info` would write
 * (src/log/access.test.ts compares them), onto the same destination, without pino's generic walk
 * of the object. Its fields hold no secret (a user id and a key id, never a key; the path through
 * redactPath, the model through loggedModel), so redaction has nothing to do in it. Any other
 * logger (a child, a test's own pino) is given the fields by `log.info`.
 */
import type { Outcome } from '../answers/outcome.js';
import type { Logger } from 'pino';
import type { AccessLogMode } from '../config/index.js';
import { infoLine } from './index.js';

/** What one request did, as the gateway traces it. */
export interface AccessRecord {
  id: string;
  method: string;
  path: string;
  family: string;
  ip: string;
  user?: string;
  keyId?: string;
  model?: string | null;
  freeTier?: boolean;
  shadow?: string;
  /**
   * Why sluice refused, where the decision alone does not say: every 401 (src/auth/reasons.ts),
   * a 503 of the key lookup (`lookup_ceiling`, `lookup_queue_full`, `lookup_failed`), a 503 for want of the bodies'
   * budget (`budget_full`, or `address_share`: its client address holds its share), and an answer
   * cut for its silence (`relay_silent`, `client_not_reading`).
   */
  reason?: string;
  status?: number;
  /** performance.now() when the request arrived. */
  start: number;
  /** Milliseconds from arrival to the decision, and spent waiting on the relay (null: none). */
  decidedMs?: number;
  upstreamMs?: number | null;
}

export type AccessLog = (r: AccessRecord, decision: Outcome) => void;

/**
 * Whether a request gets its access line under the `accessLog` setting: `errors` keeps the lines
 * operators look for (refusals, relay failures, streams either side cut, answers of 400 or more)
 * and drops the calls that went through, with what they cost.
 */
export function wantsAccessLine(mode: AccessLogMode, decision: Outcome, status: number | undefined): boolean {
  return mode === 'all' || (mode === 'errors' && (decision !== 'admitted' || status === undefined || status >= 400));
}

const round = (ms: number): number => Math.round(ms * 100) / 100;

/**
 * A key in the path: `sk-` and at least 16 more characters, wherever it starts after a character
 * that is no letter or digit (a key in the base URL, `POST /sk-<key>/v1/models`, is a common
 * mistake; `Bearer%20sk-<key>` too); or a segment of 32 or more characters of letters, digits, `-`
 * and `_` with upper case, lower case and digits all present (the shape of the random part of
 * new-api's and sluice's keys; model ids in paths carry `.`, `:` or one case only), before a `/`,
 * a `.` or the end; or a key's body, with any `-<channel>`, before a `:` (a key given as the model
 * of `/v1beta/models/<model>:generateContent`).
 */
const KEY_SEGMENT =
  /(?<=[^A-Za-z0-9]|%[0-9A-Fa-f]{2})[sS][kK]-[^/]{16,}|(?<=\/)(?:(?=[^/]*[A-Z])(?=[^/]*[a-z])(?=[^/]*[0-9])[\w-]{32,}(?=[/.]|$)|(?=[^/:]*[A-Z])(?=[^/:]*[a-z])(?=[^/:]*[0-9])[A-Za-z0-9]{32,}(?:-[^/:]*)?(?=:))/g;
const REDACTED_SEGMENT = '[redacted]';

/**
 * The path as logged: key-shaped segments replaced by `[redacted]`. (The query string, where a
 * `?key=` would be, is never logged.)
 */
export function redactPath(path: string): string {
  // Most paths have no segment long enough to be a key: no regex run for them.
  return path.length < 20 ? path : path.replace(KEY_SEGMENT, REDACTED_SEGMENT);
}

/**
 * The longest value a field taken from the request (the path, the model) is logged with, in
 * characters (UTF-16 code units), marker included. Real model ids and routes are far shorter; a
 * client's megabytes are not worth a log line each (issue 25: a 7.7 KB gzip body naming a 7.9 MB
 * model wrote a 7.9 MB line). A constant, not a setting: no operator needs more of it.
 */
export const LOGGED_FIELD_MAX_CHARS = 256;

/**
 * A value taken from the request, as logged: whole up to LOGGED_FIELD_MAX_CHARS, else its first
 * characters and `…[cut, <length> chars]`, the length being the whole value's. At most
 * LOGGED_FIELD_MAX_CHARS in all, so that bounding a bounded value changes nothing.
 */
export function boundLogged(value: string): string {
  if (value.length <= LOGGED_FIELD_MAX_CHARS) return value;
  const marker = `…[cut, ${value.length} chars]`;
  let end = LOGGED_FIELD_MAX_CHARS - marker.length;
  // Never between the two halves of a surrogate pair.
  const last = value.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  // A copy, not a slice: V8 keeps a slice of a long string as a view of all of it, and the trace
  // holding this lives as long as the request (a stream: minutes).
  return Buffer.from(value.slice(0, end), 'utf16le').toString('utf16le') + marker;
}

/**
 * A model that is a key: `sk-` and 16 or more characters, or a key's body without it (32 or more
 * letters and digits, upper case, lower case and digits all present; model ids carry `-`, `.` or
 * one case only), with white space or `Bearer ` around it. A client swapped an SDK's key and model
 * arguments.
 */
const KEY_AS_MODEL = /^(?:[sS][kK]-.{16,}|(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])[A-Za-z0-9]{32,})$/s;
const BEARER = /^bearer\s+/i;

/** The model as logged: bounded, and never a key sent in its place. */
export function loggedModel(model: string): string {
  const bare = model.trim().replace(BEARER, '');
  return KEY_AS_MODEL.test(bare) ? REDACTED_SEGMENT : boundLogged(model);
}

/**
 * The access line's fields, in the order they are written. Fields left undefined are omitted (as
 * JSON.stringify and pino both omit them). Fields taken from the request are bounded (boundLogged).
 */
export function accessFields(r: AccessRecord, decision: Outcome, totalMs: number): Record<string, unknown> {
  return {
    reqId: r.id,
    method: r.method,
    path: boundLogged(redactPath(r.path)),
    family: r.family,
    ip: r.ip,
    user: r.user,
    keyId: r.keyId,
    model: r.model == null ? undefined : loggedModel(r.model),
    freeTier: r.freeTier,
    shadow: r.shadow,
    decision,
    reason: r.reason,
    status: r.status,
    decisionMs: r.decidedMs === undefined ? undefined : round(r.decidedMs),
    relayMs: r.upstreamMs == null ? undefined : round(r.upstreamMs),
    totalMs,
  };
}

/** A request as it ended: its record, its decision, and its total milliseconds. */
type Ended = [AccessRecord, Outcome, number];

export function createAccessLog(log: Logger): AccessLog {
  // The record is read when its line is built, at the end of the turn; nothing writes to it once
  // its request has ended.
  const line = infoLine(log, ([r, decision, totalMs]: Ended) => accessFields(r, decision, totalMs), 'request');
  return (r, decision) => {
    // Checked first so that a logger above info builds nothing.
    if (!log.isLevelEnabled('info')) return;
    const totalMs = round(performance.now() - r.start);
    if (line) line([r, decision, totalMs]);
    else log.info(accessFields(r, decision, totalMs), 'request');
  };
}
