/**
 * The access line: one JSON line per request, at info, with the record's fields and `msg:
 * "request"`. On sluice's own logger it is built here, its fields in a fixed order serialized
 * once, and written by the logger's InfoLine: the same line, byte for byte, as `log.info` with
 * accessFields would write (src/log/access.test.ts compares them), onto the same destination,
 * without pino's generic walk of an object built per request. Its fields hold no secret (a user
 * id and a key id, never a key; the path through redactPath), so redaction has nothing to do in
 * it. Any other logger (a child, a test's own pino) is given the fields by `log.info`.
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
   * and a 503 of the key lookup (`lookup_ceiling`, `lookup_failed`).
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
 * A path segment that looks like a key: `sk-` and at least 16 more characters (a key in the base
 * URL, `POST /sk-<key>/v1/models`, is a common mistake), or 32 or more characters of letters,
 * digits, `-` and `_` with upper case, lower case and digits all present (the shape of the random
 * part of new-api's and sluice's keys; model ids in paths carry `.`, `:` or one case only).
 */
const KEY_SEGMENT = /(?<=\/)(?:[sS][kK]-[^/]{16,}|(?=[^/]*[A-Z])(?=[^/]*[a-z])(?=[^/]*[0-9])[\w-]{32,})(?=\/|$)/g;
export const REDACTED_SEGMENT = '[redacted]';

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

/** A model that is a key (`sk-` and 16 or more characters): a client swapped an SDK's key and model arguments. */
const KEY_AS_MODEL = /^[sS][kK]-.{16,}$/s;

/** The model as logged: bounded, and never a key sent in its place. */
export function loggedModel(model: string): string {
  return KEY_AS_MODEL.test(model) ? REDACTED_SEGMENT : boundLogged(model);
}

/**
 * The access line's fields, in the order they are written. Fields left undefined are omitted.
 * Fields taken from the request are bounded (boundLogged).
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

/**
 * Printable ASCII other than `"` and `\\`: the characters JSON.stringify writes as they are (it
 * escapes only those two, control characters and lone surrogates).
 */
const PLAIN = /^[ !#-[\]-~]*$/;
/**
 * A string as JSON.stringify writes it, which is what pino writes for these fields (its lone
 * surrogates escaped by sluice's streamWrite hook). Most fields are plain and quoted as they are:
 * half the cost of JSON.stringify (bench/access-line.ts); access.test.ts checks every code unit.
 */
export const jsonString = (s: string): string => (PLAIN.test(s) ? `"${s}"` : JSON.stringify(s));
const str = jsonString;
/** A number as pino writes it: a finite one as JavaScript prints it, anything else as null. */
const num = (n: number): string => (Number.isFinite(n) ? String(n) : 'null');

/**
 * The access line's fields serialized, as InfoLine takes them: accessFields' fields in its order,
 * undefined ones omitted, `"msg":"request"` last.
 */
export function accessLineFields(r: AccessRecord, decision: Outcome, totalMs: number): string {
  let s = `,"reqId":${str(r.id)},"method":${str(r.method)},"path":${str(boundLogged(redactPath(r.path)))},"family":${str(r.family)},"ip":${str(r.ip)}`;
  if (r.user !== undefined) s += `,"user":${str(r.user)}`;
  if (r.keyId !== undefined) s += `,"keyId":${str(r.keyId)}`;
  if (r.model != null) s += `,"model":${str(loggedModel(r.model))}`;
  if (r.freeTier !== undefined) s += `,"freeTier":${r.freeTier}`;
  if (r.shadow !== undefined) s += `,"shadow":${str(r.shadow)}`;
  s += `,"decision":${str(decision)}`;
  if (r.reason !== undefined) s += `,"reason":${str(r.reason)}`;
  if (r.status !== undefined) s += `,"status":${num(r.status)}`;
  if (r.decidedMs !== undefined) s += `,"decisionMs":${num(round(r.decidedMs))}`;
  if (r.upstreamMs != null) s += `,"relayMs":${num(round(r.upstreamMs))}`;
  return `${s},"totalMs":${num(totalMs)},"msg":"request"`;
}

export function createAccessLog(log: Logger): AccessLog {
  const line = infoLine(log);
  return (r, decision) => {
    // Checked first so that a logger above info builds nothing.
    if (!log.isLevelEnabled('info')) return;
    const totalMs = round(performance.now() - r.start);
    if (line) line(accessLineFields(r, decision, totalMs));
    else log.info(accessFields(r, decision, totalMs), 'request');
  };
}
