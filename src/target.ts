/**
 * What path the relay will route on. The relay (Go net/http + gin) routes on the percent-decoded
 * path, decoded exactly once, and the forwarding engine collapses repeated slashes, so every
 * decision here (per-IP limits, which headers carry a key, the model named in the path) is taken
 * on that same path: `/%761/chat/completions` must not dodge a limit that `/v1/chat/completions`
 * meets, and `a%2525b` is the model `a%25b`, as the relay reads it, not `a%b`.
 *
 * This is the only place the path is decoded: everything downstream (src/model/path.ts
 * included) takes `Target.path` as it is and must not decode it again.
 */

export interface Target {
  /** Decoded once (Go's way), slash-collapsed path: what decisions are made on. */
  path: string;
  /** Path and query as sent to the relay. */
  forwardUrl: string;
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
 */
export function parseTarget(rawUrl: string | undefined): Target | null {
  const url = rawUrl ?? '/';
  if (url.charCodeAt(0) !== 0x2f /* / */) return null; // absolute-form or '*': not for a sidecar
  const q = url.indexOf('?');
  const rawPath = collapseSlashes(q === -1 ? url : url.slice(0, q));
  let query = q === -1 ? '' : url.slice(q);
  let path = pathUnescape(rawPath);
  if (path === undefined) return null;
  if (path !== rawPath) path = collapseSlashes(path);
  if (query && path.startsWith('/v1beta/')) query = withoutQueryKey(query);
  return { path, forwardUrl: rawPath + query };
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

function hexValue(c: number | undefined): number {
  if (c === undefined) return -1;
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * Keys in the query string are not accepted, and the relay would let one
 * override the header sluice authenticated, so `key=` is removed.
 */
function withoutQueryKey(query: string): string {
  const parts = query.slice(1).split('&');
  const kept = parts.filter((p) => {
    const name = p.split('=', 1)[0]!;
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      /* keep the raw name */
    }
    return decoded !== 'key';
  });
  if (kept.length === parts.length) return query;
  return kept.length === 0 ? '' : '?' + kept.join('&');
}
