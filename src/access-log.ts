/**
 * The access line: one JSON line per request, at info, in pino's own format and onto pino's own
 * stream, but built by hand. Handing pino a fifteen-field object cost 2.0-3.3 µs per line in
 * isolation against 0.6-1.2 this way (`bench/tools/access-line.ts`), and more under load
 * (allocation, pino's field walk and redaction, and the GC behind them).
 * The fields here are known, contain no secret (a user id and a key id, never a key), and only a
 * few are client strings; those are escaped exactly like JSON.stringify. The line is pino's byte
 * for byte, with one exception: a lone surrogate in a short string, which pino writes raw (it
 * reaches the log as U+FFFD) and this escapes (`\ud800`), so the line reads back as sent.
 *
 * Anything else a logger might be configured with (hooks, mixins, serializers, a stream that
 * routes on level) falls back to `log.info`, so the line is never lost or misrouted.
 */
import pino, { type Logger } from 'pino';
import type { AccessLogMode } from './config.js';

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
  status?: number;
  /** performance.now() when the request arrived. */
  start: number;
  /** Milliseconds from arrival to the decision, and spent waiting on the relay (null: none). */
  decidedMs?: number;
  upstreamMs?: number | null;
}

export type AccessLog = (r: AccessRecord, decision: string) => void;

/**
 * Whether a request gets its access line under the `accessLog` setting: `errors` keeps the lines
 * operators look for (refusals, relay failures, streams either side cut, answers of 400 or more)
 * and drops the calls that went through, with what they cost.
 */
export function wantsAccessLine(mode: AccessLogMode, decision: string, status: number | undefined): boolean {
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

const S = pino.symbols;
// Present in pino 9's symbols but missing from its type declarations.
const msgPrefixSym = (S as unknown as Record<string, symbol | undefined>).msgPrefixSym;

/** Printable ASCII without `"` and `\\`: written as it is. Anything else goes through JSON.stringify. */
const PLAIN = /^[ !#-[\]-~]*$/;
const str = (s: string): string => (PLAIN.test(s) ? `"${s}"` : JSON.stringify(s));

const ACCESS_FIELDS = ['reqId', 'method', 'path', 'family', 'ip', 'user', 'keyId', 'model', 'freeTier', 'shadow', 'decision', 'status', 'decisionMs', 'relayMs', 'totalMs'];

interface Stream {
  write(line: string): unknown;
}

/**
 * The pieces of `log` a direct write needs, or null when the logger is configured in any way
 * that would change the access line from what pino itself would write: then pino writes it.
 */
function directWriter(log: Logger): { stream: Stream; head: () => string; end: string } | null {
  const p = log as unknown as Record<symbol, unknown>;
  const stream = p[S.streamSym] as (Stream & Record<symbol, unknown>) | undefined;
  const lsCache = p[S.lsCacheSym] as Record<number, string> | undefined;
  const time = p[S.timeSym];
  const chindings = p[S.chindingsSym];
  const end = p[S.endSym];
  const hooks = p[S.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined;
  const formatters = p[S.formattersSym] as { log?: unknown } | undefined;
  const serializers = (p[S.serializersSym] ?? {}) as Record<string, unknown>;
  const stringifiers = (p[S.stringifiersSym] ?? {}) as Record<string | symbol, unknown>;
  const level = lsCache?.[30];
  const plain =
    typeof stream?.write === 'function' &&
    stream[S.needsMetadataGsym] !== true &&
    typeof level === 'string' &&
    typeof time === 'function' &&
    typeof chindings === 'string' &&
    typeof end === 'string' &&
    p[S.messageKeySym] === 'msg' &&
    !p[S.mixinSym] &&
    !p[S.nestedKeySym] &&
    (msgPrefixSym === undefined || !p[msgPrefixSym]) &&
    !hooks?.logMethod &&
    !hooks?.streamWrite &&
    !formatters?.log &&
    !stringifiers[S.wildcardFirstSym] &&
    ACCESS_FIELDS.every((k) => !serializers[k] && !stringifiers[k]) &&
    !serializers.msg &&
    !stringifiers.msg;
  if (!plain) return null;
  const stamp = time as (this: Logger) => string;
  // The bindings are read per line: `log.setBindings` replaces them.
  return { stream, head: () => level + stamp.call(log) + (p[S.chindingsSym] as string), end };
}

/**
 * The access line's fields as an object, in their order: what pino is given when it writes the
 * line itself, and what the hand-built line must read back as. Fields left undefined are omitted.
 */
export function accessFields(r: AccessRecord, decision: string, totalMs: number): Record<string, unknown> {
  return {
    reqId: r.id,
    method: r.method,
    path: redactPath(r.path),
    family: r.family,
    ip: r.ip,
    user: r.user,
    keyId: r.keyId,
    model: r.model ?? undefined,
    freeTier: r.freeTier,
    shadow: r.shadow,
    decision,
    status: r.status,
    decisionMs: r.decidedMs === undefined ? undefined : round(r.decidedMs),
    relayMs: r.upstreamMs == null ? undefined : round(r.upstreamMs),
    totalMs,
  };
}

export function createAccessLog(log: Logger): AccessLog {
  const direct = directWriter(log);
  return (r, decision) => {
    if (!log.isLevelEnabled('info')) return;
    const totalMs = round(performance.now() - r.start);
    if (!direct) {
      log.info(accessFields(r, decision, totalMs), 'request');
      return;
    }
    // Field order and spelling as pino writes them: level, time, bindings, fields, msg.
    let line = direct.head();
    line += `,"reqId":${str(r.id)},"method":${str(r.method)},"path":${str(redactPath(r.path))},"family":${str(r.family)},"ip":${str(r.ip)}`;
    if (r.user !== undefined) line += `,"user":${str(r.user)}`;
    if (r.keyId !== undefined) line += `,"keyId":${str(r.keyId)}`;
    if (r.model != null) line += `,"model":${str(r.model)}`;
    if (r.freeTier !== undefined) line += `,"freeTier":${r.freeTier}`;
    if (r.shadow !== undefined) line += `,"shadow":${str(r.shadow)}`;
    line += `,"decision":${str(decision)}`;
    if (r.status !== undefined) line += `,"status":${r.status}`;
    if (r.decidedMs !== undefined) line += `,"decisionMs":${round(r.decidedMs)}`;
    if (r.upstreamMs != null) line += `,"relayMs":${round(r.upstreamMs)}`;
    line += `,"totalMs":${totalMs},"msg":"request"` + direct.end;
    direct.stream.write(line);
  };
}
