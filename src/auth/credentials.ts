/**
 * The key a request carries, read from the headers its path accepts (contract §5): which headers
 * those are is each route's (src/routing/routes.ts); reading them, in order, and telling why none
 * gave a key, is done here. Pure.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { lookupKey } from './keys.js';
import type { HeaderReason } from './reasons.js';

/**
 * The headers that carry a key, on some path or other (contract §5); `authorization` counts
 * everywhere. With PROTOCOL_KEY_HEADER, the fields forwarding rewrites (src/forward/headers.ts)
 * and the log redacts (src/log/index.ts).
 */
export const KEY_HEADERS = ['authorization', 'x-api-key', 'x-goog-api-key'] as const;

/**
 * The field a WebSocket upgrade may carry its key in, as the entry `openai-insecure-api-key.<key>`
 * (a browser's WebSocket can set no other field; OpenAI's browser client does this). Read on
 * upgrades only (presentedKeys' `webSocket`, set by src/gateway.ts); rewritten by
 * src/forward/headers.ts; the log redacts it too.
 */
export const PROTOCOL_KEY_HEADER = 'sec-websocket-protocol';
const PROTOCOL_KEY_ENTRY = 'openai-insecure-api-key';

export interface CredentialRules {
  /** `x-api-key` counts (the messages protocol): `/v1/messages` and `/v1/models` and below. */
  xApiKey: boolean;
  /** `x-goog-api-key` counts (the native generative-content protocol): `/v1beta/models` and below. */
  xGoogApiKey: boolean;
}

/**
 * The key candidates a request presents in headers that count on its path.
 * An empty array means no counting header at all. A header that counts but
 * holds no usable key yields an empty string, which can never authenticate:
 * a wrong key beside a valid one still fails. So does a repeated key header. On a WebSocket
 * upgrade (`webSocket`) the `Sec-WebSocket-Protocol` key comes first, and a key that is no token
 * yields "".
 */
export function presentedKeys(headers: IncomingHttpHeaders, rules: CredentialRules, rawHeaders: readonly string[], webSocket = false): string[] {
  const out: string[] = [];
  if (webSocket) {
    const v = headers[PROTOCOL_KEY_HEADER];
    // new-api ignores an empty one (Go's Header.Get), as Node gives it: trimmed.
    if (v !== undefined && v !== '') {
      const key = occurrences(rawHeaders, PROTOCOL_KEY_HEADER) > 1 ? '' : protocolKey(v);
      if (key !== null) out.push(key);
    }
  }
  const auth = headers.authorization;
  // Node keeps only the first of several Authorization lines (and the relay, Go, reads only the
  // first): a second one with a wrong key would go unseen, so a repeated one is ambiguous.
  if (auth !== undefined) out.push(occurrences(rawHeaders, 'authorization') > 1 ? '' : bearerToken(auth));
  if (rules.xApiKey) {
    const v = headers['x-api-key'];
    if (v !== undefined) out.push(single(v, rawHeaders, 'x-api-key'));
  }
  if (rules.xGoogApiKey) {
    const v = headers['x-goog-api-key'];
    if (v !== undefined) out.push(single(v, rawHeaders, 'x-goog-api-key'));
  }
  // On an upgrade the key goes into the relay's Sec-WebSocket-Protocol list too (withProtocolKey):
  // one that is no token would be split there, and the relay read another (`sk-<key>-5,x` as
  // `sk-<key>-5`, its channel 5, where sluice judged `5,x`).
  return webSocket ? out.map((key) => (TOKEN.test(key) ? key : '')) : out;
}

/**
 * Why the request's key headers hold no key to look up, for its access line, once the
 * authenticator found none (`no_key`: no header that counts on the path) or an empty one
 * (`empty_key`: the first counting header, in the order presentedKeys reads them, that holds no
 * key). Called on refusals only: the request path never pays for it.
 */
export function headerReason(headers: IncomingHttpHeaders, rules: CredentialRules, rawHeaders: readonly string[], found: 'no_key' | 'empty_key'): HeaderReason {
  const counts = (name: (typeof KEY_HEADERS)[number]): boolean => name === 'authorization' || (name === 'x-api-key' ? rules.xApiKey : rules.xGoogApiKey);
  if (found === 'no_key') return KEY_HEADERS.some((name) => headers[name] !== undefined) ? 'wrong_header' : 'no_key';
  for (const name of KEY_HEADERS) {
    const v = headers[name];
    if (v === undefined || !counts(name)) continue;
    if (occurrences(rawHeaders, name) > 1) return 'repeated_header';
    const text = (Array.isArray(v) ? v.join(', ') : v).trim();
    const key = name === 'authorization' ? bearerToken(text) : text;
    if (name === 'authorization' && key === '' && !/^bearer([ \t]|$)/i.test(text)) return 'not_bearer';
    if (lookupKey(key) === '') return 'empty_key';
  }
  return 'empty_key';
}

/** How many times a field appears in a raw header list (name, value, name, value, ...), in any case. */
function occurrences(raw: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const field = raw[i]!;
    if (field.length === name.length && field.toLowerCase() === name) n++;
  }
  return n;
}

/**
 * A custom key header's value; "" (no key) when the header came more than once. Node joins
 * repeated custom headers with ", " and the relay (Go) reads the first: a repeated key header is
 * ambiguous, so it holds no key, and costs no lookup.
 */
function single(v: string | string[], raw: readonly string[], name: string): string {
  if (Array.isArray(v)) return '';
  return v.includes(',') && occurrences(raw, name) > 1 ? '' : v.trim();
}

/** RFC 6455: `Sec-WebSocket-Protocol` is a list of tokens (RFC 9110's), split by commas with optional spaces and tabs. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const OWS = /^[ \t]+|[ \t]+$/g;

/** The list's entries, without their spaces and tabs; null if one is no token (or empty). */
function protocolEntries(value: string): string[] | null {
  const entries = value.split(',').map((entry) => entry.replace(OWS, ''));
  return entries.every((entry) => TOKEN.test(entry)) ? entries : null;
}

/**
 * The key an upgrade's `Sec-WebSocket-Protocol` carries: the one entry `openai-insecure-api-key.<key>`;
 * null when no entry names a key. "" (no key, refused) for a value that is no list of tokens,
 * for two entries naming keys, and for an entry naming one badly (`openai-insecure-api-key.` alone,
 * or without its dot). Go trims other characters than JavaScript does (a no-break space, in UTF-8
 * or alone): anything but tokens could have the relay read another entry than sluice.
 */
export function protocolKey(value: string): string | null {
  const entries = protocolEntries(value);
  if (entries === null) return '';
  let key: string | null = null;
  for (const entry of entries) {
    if (!entry.startsWith(PROTOCOL_KEY_ENTRY)) continue;
    if (key !== null) return '';
    key = entry.startsWith(`${PROTOCOL_KEY_ENTRY}.`) ? entry.slice(PROTOCOL_KEY_ENTRY.length + 1) : '';
  }
  return key;
}

/**
 * `Sec-WebSocket-Protocol` as the relay must see it: the client's entries (`realtime`, ...) as
 * sent, and one `openai-insecure-api-key.<key>` entry with `key`, where the client's was or last.
 * new-api's TokenAuth reads the key from it over `Authorization` (older releases read the whole
 * value as the key when no entry names one): either way it reads `key`. Its upgrader agrees only
 * on `realtime`, so the entry is never echoed to the client. For a value protocolKey accepted.
 */
export function withProtocolKey(value: string, key: string): string {
  const out: string[] = [];
  let placed = false;
  for (const entry of protocolEntries(value) ?? []) {
    if (!entry.startsWith(PROTOCOL_KEY_ENTRY)) out.push(entry);
    else if (!placed) {
      out.push(`${PROTOCOL_KEY_ENTRY}.${key}`);
      placed = true;
    }
  }
  if (!placed) out.push(`${PROTOCOL_KEY_ENTRY}.${key}`);
  return out.join(', ');
}

/** `Bearer <token>`, scheme case-insensitive; anything else yields "". */
export function bearerToken(value: string): string {
  const v = value.trim();
  if (v.length < 7 || v.slice(0, 6).toLowerCase() !== 'bearer' || (v[6] !== ' ' && v[6] !== '\t')) return '';
  return v.slice(7).trim();
}
