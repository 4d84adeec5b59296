/**
 * What path the relay will route on. The relay (Go) routes on the
 * percent-decoded path, and the forwarding engine collapses repeated slashes,
 * so every decision here is taken on that same path: `/%761/chat/completions`
 * must not dodge a limit that `/v1/chat/completions` meets.
 */

export interface Target {
  /** Decoded, slash-collapsed path: what decisions are made on. */
  path: string;
  /** Path and query as sent to the relay. */
  forwardUrl: string;
}

export function parseTarget(rawUrl: string | undefined): Target | null {
  const url = rawUrl ?? '/';
  if (url.charCodeAt(0) !== 0x2f /* / */) return null; // absolute-form or '*': not for a sidecar
  const q = url.indexOf('?');
  const rawPath = collapseSlashes(q === -1 ? url : url.slice(0, q));
  let query = q === -1 ? '' : url.slice(q);
  let path: string;
  try {
    path = rawPath.indexOf('%') === -1 ? rawPath : decodeURIComponent(rawPath);
  } catch {
    return null;
  }
  if (path !== rawPath) path = collapseSlashes(path);
  if (query && path.startsWith('/v1beta/')) query = withoutQueryKey(query);
  return { path, forwardUrl: rawPath + query };
}

function collapseSlashes(p: string): string {
  return p.includes('//') ? p.replace(/\/{2,}/g, '/') : p;
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
