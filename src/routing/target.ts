/**
 * What path the relay will route on. The relay (Go net/http + gin) routes on the percent-decoded
 * path, decoded exactly once, after sluice collapsed the repeated slashes it was sent with, so every
 * decision here (per-IP limits, which headers carry a key, the model named in the path) is taken
 * on that same path: `/%761/chat/completions` must not dodge a limit that `/v1/chat/completions`
 * meets, and `a%2525b` is the model `a%25b`, as the relay reads it, not `a%b`.
 *
 * This is the only place the path is decoded: everything downstream (src/model/path.ts
 * included) takes `Target.path` as it is and must not decode it again.
 *
 * A path with a `.` or `..` segment is refused: gin routes `/x/../api/log/token` as it is (a 404),
 * but any normalising proxy or server between sluice and the relay would resolve it to
 * `/api/log/token`, which sluice would then have matched as one path and forwarded as another.
 */
import { firstQueryValue, hexValue, queryUnescape } from '../model/form.js';

export interface Target {
  /** The path as forwarded (its repeated slashes collapsed), decoded once (Go's way): what decisions are made on. */
  path: string;
  /** Path and query as sent to the relay. */
  forwardUrl: string;
  /** The query as the client sent it, without `?` ('' when none). */
  query: string;
  /**
   * A non-empty `key` parameter was removed from the query where the relay reads it only to choose
   * Gemini's answer format (`GET /v1/models?key=`): the key header sent instead keeps that choice.
   */
  queryKey: boolean;
}

/**
 * The target of a request, or null when the relay's server would answer 400 without routing.
 *
 * - The path is decoded like Go's `url.PathUnescape` (which `net/http` applies to the request
 *   target before gin routes on `URL.Path`): every `%XX` becomes that byte, `%2F` included, and
 *   `+` stays `+`. Decoded bytes that are not UTF-8 (`%FF`) are accepted, as Go accepts them, and
 *   read as U+FFFD here. The relay compares those raw bytes, which match no UTF-8 name; U+FFFD
 *   matches no name either unless a configured name contains U+FFFD itself.
 * - A `%` not followed by two hex digits (`%zz`, `%6`, a trailing `%`) makes Go's URL parsing
 *   fail, and `net/http` answers `400 Bad Request` and closes the connection before any handler
 *   runs: such a path gives null here, so the gateway answers 400 as well.
 * - A `.` or `..` segment, once decoded, also gives null (see above); `invalidTargetReason` says
 *   which rule a refused target broke.
 */
export function parseTarget(rawUrl: string | undefined): Target | null {
  const url = rawUrl ?? '/';
  if (url.charCodeAt(0) !== 0x2f /* / */) return null; // absolute-form or '*': not for a sidecar
  const q = url.indexOf('?');
  const rawPath = collapseSlashes(q === -1 ? url : url.slice(0, q));
  const query = q === -1 ? '' : url.slice(q + 1);
  // The slashes an escape makes are not collapsed: the relay routes, and its distributor reads
  // task markers and models, on Go's decoded path as it is (gin's RemoveExtraSlash is off).
  const path = pathUnescape(rawPath);
  if (path === undefined) return null;
  if ((path.includes('/.') || path.includes('\\.')) && hasDotSegment(path)) return null;
  let forwardQuery = q === -1 ? '' : url.slice(q);
  let queryKey = false;
  if (query && readsQueryKey(path)) {
    queryKey = path === '/v1/models' && !!firstQueryValue(query, 'key');
    forwardQuery = withoutQueryKey(forwardQuery);
  }
  return { path, forwardUrl: forwardedPath(rawPath) + forwardQuery, query, queryKey };
}

/**
 * The path as it leaves for the relay, which must route on the path judged here. http-proxy joins
 * it to the target with a rewrite of the first `http:/` and `https:/` into `http://`, `https://`
 * (common.urlJoin): their colon goes percent-encoded, which the relay decodes back to the same path.
 */
function forwardedPath(rawPath: string): string {
  return rawPath.includes(':/') ? rawPath.replace(/(https?):\//g, '$1%3A/') : rawPath;
}

/** Why parseTarget refused this target (for the 400's message). */
export function invalidTargetReason(rawUrl: string | undefined): string {
  const url = rawUrl ?? '/';
  if (url.charCodeAt(0) !== 0x2f) return 'the request target is not a path';
  const q = url.indexOf('?');
  const path = pathUnescape(q === -1 ? url : url.slice(0, q));
  if (path === undefined) return 'malformed percent escape in the request path';
  return "the request path has a '.' or '..' segment";
}

/**
 * Whether a decoded path has a `.` or `..` segment. Backslashes count as separators too, and a
 * segment's `;parameters` are ignored (`/..;/`), as some servers and proxies read them.
 */
function hasDotSegment(path: string): boolean {
  for (const segment of path.split(/[/\\]/)) {
    const semi = segment.indexOf(';');
    const s = semi === -1 ? segment : segment.slice(0, semi);
    if (s === '.' || s === '..') return true;
  }
  return false;
}

/**
 * Where the relay reads a `key` query parameter: as the key itself under `/v1beta/models`,
 * `/v1beta/openai/models` and `/v1/models/` (it overrides the `Authorization` header sluice
 * authenticated), and as the Gemini format marker on `/v1/models`.
 */
function readsQueryKey(path: string): boolean {
  return path.startsWith('/v1beta/') || path === '/v1/models' || path.startsWith('/v1/models/');
}

function collapseSlashes(p: string): string {
  return p.includes('//') ? p.replace(/\/{2,}/g, '/') : p;
}

/**
 * Percent-decodes like Go's url.PathUnescape: any `%XX` becomes that byte (`%2F` included), `+`
 * stays `+`, and a `%` without two hex digits makes the whole input malformed (undefined).
 * Unlike decodeURIComponent it does not throw on decoded bytes that are not UTF-8: the bytes
 * are read as UTF-8 with U+FFFD for what is not (never swallowing the ASCII after it).
 * Node's HTTP parser only lets printable ASCII into a request target, so encoding the input
 * as UTF-8 to get its bytes is exact for real requests.
 */
function pathUnescape(input: string): string | undefined {
  if (!input.includes('%')) return input;
  const raw = Buffer.from(input, 'utf8');
  const out = Buffer.allocUnsafe(raw.length);
  let length = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== 0x25 /* % */) {
      out[length++] = c;
      continue;
    }
    const hi = hexValue(raw[i + 1]);
    const lo = hexValue(raw[i + 2]);
    if (hi < 0 || lo < 0) return undefined;
    out[length++] = (hi << 4) | lo;
    i += 2;
  }
  return out.toString('utf8', 0, length);
}

/**
 * Keys in the query string are not accepted, and the relay would let one
 * override the header sluice authenticated, so `key=` is removed.
 */
function withoutQueryKey(query: string): string {
  const parts = query.slice(1).split('&');
  const kept = parts.filter((p) => {
    // As Go's url.ParseQuery reads the name; one that does not decode (null) Go drops: no key either way.
    return queryUnescape(p.split('=', 1)[0]!) !== 'key';
  });
  if (kept.length === parts.length) return query;
  return kept.length === 0 ? '' : '?' + kept.join('&');
}
