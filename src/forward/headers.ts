/**
 * Header rewriting in both directions. Pure functions over header objects so
 * the rules are testable without sockets.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { KEY_HEADERS, PROTOCOL_KEY_HEADER, withProtocolKey } from '../auth/credentials.js';

/** RFC 9110 §7.6.1 hop-by-hop fields, plus the proxy-* family and legacy ones. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'trailers',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Field names the `Connection` header declares hop-by-hop, lower-cased (`close` is an option, not a field). */
function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> {
  const out = new Set<string>();
  for (const part of value === undefined ? [] : Array.isArray(value) ? value : [value]) {
    for (const t of part.split(',')) {
      const name = t.trim().toLowerCase();
      if (name !== '' && name !== 'close') out.add(name);
    }
  }
  return out;
}

/**
 * End-to-end fields sluice reads to judge a request (its body's framing, type and coding, the key
 * headers, a preflight's) or rewrites for the relay (Host, the key headers). A `Connection` header
 * naming one declares it hop-by-hop: forwarding would drop it, and the relay would read another
 * request than the one sluice judged (`Connection: close, content-type` and the model read from a
 * JSON body the relay then sees without its Content-Type).
 */
const JUDGED_FIELDS: ReadonlySet<string> = new Set([
  'content-type',
  'content-encoding',
  'content-length',
  'transfer-encoding',
  'host',
  ...KEY_HEADERS,
  PROTOCOL_KEY_HEADER,
  'origin',
  'access-control-request-method',
]);

/** The first field sluice judges the request by that its `Connection` header names, or null. */
export function connectionNamesJudgedField(value: string | string[] | undefined): string | null {
  for (const name of connectionTokens(value)) if (JUDGED_FIELDS.has(name)) return name;
  return null;
}

function isHopByHop(name: string): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith('proxy-');
}

export interface OutgoingAuth {
  /**
   * The key the relay must see (the client's key, or `upstream.credential`), or null for a call
   * forwarded without one (a CORS preflight): then no key header reaches the relay at all.
   */
  key: string | null;
  /** Send `x-goog-api-key` though the client sent none: it sent a `?key=` that was removed (src/routing/target.ts). */
  googKey?: boolean;
  /** The client address sluice decided on. */
  clientIp: string;
  /** Length of the buffered body, or null when there is none. */
  bodyLength: number | null;
  /** A WebSocket upgrade (src/http/upgrade.ts): `Upgrade` and `Connection: Upgrade` stay, to ask the relay for the switch. */
  webSocket?: boolean;
}

/**
 * Rewrites the client's headers, in place, into what the relay receives: hop-by-hop fields gone
 * (but `Upgrade` and `Connection: Upgrade` on a WebSocket upgrade),
 * `X-Forwarded-For` naming exactly the address sluice decided on, and the key in `Authorization`
 * and in every other key header the client sent.
 *
 * new-api reads a key from `x-api-key` on paths containing `/v1/messages` or `/v1/models`, and
 * from `x-goog-api-key` under `/v1beta/models` and `/v1/models/`, each overriding
 * `Authorization`; and it chooses the answer's format by their presence (`GET /v1/models` lists
 * Anthropic's shape for `x-api-key` with `anthropic-version`, Gemini's for `x-goog-api-key`). So a
 * key header the client sent is kept, holding the key the relay must see: the format is chosen as
 * without sluice, and whichever header the relay reads, it reads the key sluice authenticated, never
 * a second key the client put beside it. An empty one stays empty (the relay treats it as absent).
 * `Sec-WebSocket-Protocol` overrides the key too (new-api reads `openai-insecure-api-key.<key>`
 * from it, or takes the whole value): on a WebSocket upgrade it goes on holding the key the relay
 * must see (src/auth/credentials.ts), elsewhere it is dropped. `mj-api-secret`, which stands in
 * for a missing key, is dropped.
 */
export function prepareRequestHeaders(headers: IncomingHttpHeaders, auth: OutgoingAuth): void {
  const declared = connectionTokens(headers.connection);
  const upgrade = headers.upgrade;
  for (const name of Object.keys(headers)) {
    // Node lower-cases incoming field names.
    if (isHopByHop(name) || declared.has(name)) delete headers[name];
  }
  const key = auth.key;
  if (key === null) {
    for (const name of KEY_HEADERS) delete headers[name];
  } else {
    headers.authorization = `Bearer ${key}`;
    if (headers['x-api-key']) headers['x-api-key'] = key;
    if (headers['x-goog-api-key'] || auth.googKey) headers['x-goog-api-key'] = key;
  }
  const protocol = headers[PROTOCOL_KEY_HEADER];
  if (auth.webSocket && upgrade !== undefined) {
    headers.connection = 'Upgrade';
    headers.upgrade = upgrade;
    // Empty, the relay ignores it, as sluice did.
    if (protocol !== undefined && protocol !== '' && key !== null) headers[PROTOCOL_KEY_HEADER] = withProtocolKey(protocol, key);
  } else {
    delete headers[PROTOCOL_KEY_HEADER];
  }
  delete headers['mj-api-secret'];
  // The relay trusts the left-most X-Forwarded-For value, so no client-chosen one may survive.
  delete headers['x-real-ip'];
  delete headers['forwarded'];
  headers['x-forwarded-for'] = auth.clientIp;
  if (auth.bodyLength === null) {
    delete headers['content-length'];
  } else {
    headers['content-length'] = String(auth.bodyLength);
  }
  // A forwarded `Expect: 100-continue` would stall: the body is already read.
  delete headers.expect;
}

/** Filters a raw header list (name, value, name, value, ...) of the relay's response. */
export function filterResponseHeaders(raw: readonly string[]): string[] {
  // Names the relay's `Connection` header declares hop-by-hop.
  const declared = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') for (const t of connectionTokens(raw[i + 1])) declared.add(t);
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!isHopByHop(name) && !declared.has(name)) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}
