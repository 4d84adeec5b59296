/**
 * Every answer sluice gives a public request on its own behalf, one entry per condition: the
 * outcome it is counted and logged as (src/answers/outcome.ts), its status, its body's code and
 * message, the fields it always carries, and whether it closes the connection. A new refusal is a
 * new entry here (and a row in README's answers table, which test/docs.test.ts holds to this one).
 *
 * Bodies follow the relay's shape byte for byte: Go's encoder sorts keys, so `code`, `message`,
 * `type`; the message ends with `(request id: <id>)`. A bare answer has no body at all.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatMessage } from './template.js';
import { announcesBytes } from '../http/body.js';

export type Fields = Readonly<Record<string, string>>;

/** The params a message template fills in (`{limit}`), each a string or a number. */
type TemplateParams<M extends string> = M extends `${string}{${infer K}}${infer Rest}` ? { readonly [k in K]: string | number } & TemplateParams<Rest> : unknown;

export interface Refusal<O extends string = string, P = unknown> {
  readonly outcome: O;
  readonly status: number;
  /** `error.code` and the message template (`{name}` filled from the params); null: a bare answer, no body. */
  readonly body: { readonly code: string; readonly message: string } | null;
  /** The fields the answer carries beside the request id (Retry-After, ...), from its params. */
  readonly headers: (params: P) => Fields;
  /** Closes the connection after the answer (it also closes, whatever this says, when the request's body is unread). */
  readonly close: boolean;
}

const NO_FIELDS: Fields = Object.freeze({});
const RETRY_SOON: Fields = Object.freeze({ 'retry-after': '1' });
/**
 * The official OpenAI and Anthropic SDKs retry a 5xx on their own (twice by default), and obey this
 * field. After the relay was silent this long, a retry would run the whole call again on it.
 */
const DO_NOT_RETRY: Fields = Object.freeze({ 'x-should-retry': 'false' });

/** One entry; its params are what its message names and what its `headers` take. */
function refusal<const O extends string, const M extends string = '', H = unknown>(spec: {
  outcome: O;
  status: number;
  body: { code: string; message: M } | null;
  headers?: (params: H) => Fields;
  close?: boolean;
}): Refusal<O, TemplateParams<M> & H> {
  return Object.freeze({ outcome: spec.outcome, status: spec.status, body: spec.body, headers: spec.headers ?? (() => NO_FIELDS), close: spec.close ?? false });
}

const retryAfter = (p: { retryAfter: number }): Fields => ({ 'retry-after': String(p.retryAfter) });

/** A free call's answer carries its RateLimit fields (none in shadow mode) after Retry-After. */
type FreeTierFields = { retryAfter: number; rateLimit?: Fields };
const freeTierFields = (p: FreeTierFields): Fields => ({ 'retry-after': String(p.retryAfter), ...p.rateLimit });

/** The 503 of a key (or limit) that cannot be judged: one body whichever store is out. */
const STORE_UNAVAILABLE_BODY = { code: 'store_unavailable', message: 'The gateway cannot reach its key and limit store right now; retry shortly.' } as const;
const BAD_REQUEST_BODY = { code: 'invalid_request', message: 'Invalid request: {reason}.' } as const;
const UPSTREAM_UNREACHABLE_BODY = { code: 'upstream_unreachable', message: 'The upstream relay could not be reached or failed before answering.' } as const;

export const Refusals = Object.freeze({
  /** Contract §2/§5: the text says authentication did not pass, that the error alone cannot tell whether the gateway key or an upstream credential is at fault, and that it does not prove the key invalid. The code is empty, as the relay's. */
  UNAUTHORIZED: refusal({
    outcome: 'unauthorized',
    status: 401,
    body: { code: '', message: '请求认证未通过：仅凭此错误无法判断是网关 API 密钥还是上游凭据的问题，也不能证明该密钥无效，请检查所用的认证头与密钥' },
  }),
  /** A per-IP rule (contract §8): bare, as the contract's per-IP 429. */
  IP_LIMITED: refusal({ outcome: 'ip_limited', status: 429, body: null, headers: retryAfter }),
  /** The relay's own bare per-address 429 on a query endpoint, given the Retry-After the contract promises there (the rule's window). */
  RELAY_IP_LIMITED: refusal({ outcome: 'relay_ip_limited', status: 429, body: null, headers: retryAfter }),
  FREE_TIER_MINUTE: refusal({
    outcome: 'free_tier_minute',
    status: 429,
    body: {
      code: 'free_tier_rate_limited',
      message:
        'Free-tier rate limit exceeded: at most {limit} requests per {window} seconds across all free models. Retry after {retryAfter} seconds, or switch to the paid counterpart of the model for stable use.',
    },
    headers: freeTierFields,
  }),
  FREE_TIER_DAY: refusal({
    outcome: 'free_tier_day',
    status: 402,
    body: {
      code: 'free_tier_daily_exhausted',
      message:
        'Free-tier daily limit of {limit} requests reached across all free models; it resets at 00:00 {timeZone}. Switch to the paid counterpart of the model for stable use.',
    },
    headers: freeTierFields,
  }),
  /** The relay's 429 on an admitted free call: its own upstream free tier is busy. */
  FREE_TIER_UPSTREAM: refusal({
    outcome: 'free_tier_upstream',
    status: 402,
    body: {
      code: 'free_tier_exhausted',
      message:
        'The upstream free tier is momentarily rate limited at peak times (unrelated to your daily limit). Back off 30 to 60 seconds, then retry, or switch to the paid counterpart of the model.',
    },
    headers: (p: { rateLimit?: Fields }) => ({ 'retry-after': '30', ...p.rateLimit }),
  }),
  BODY_TOO_LARGE: refusal({ outcome: 'too_large', status: 413, body: { code: 'request_body_too_large', message: 'Request body exceeds the limit of {limit} bytes.' } }),
  /** A compressed body that decodes past maxDecodedBodyBytes (its raw size was within maxBodyBytes). */
  DECODED_BODY_TOO_LARGE: refusal({
    outcome: 'too_large',
    status: 413,
    body: {
      code: 'request_body_too_large',
      message: 'Request body exceeds the limit of {limit} bytes once its content-encoding is undone; send it uncompressed (up to the body limit) or smaller.',
    },
  }),
  UNSUPPORTED_ENCODING: refusal({ outcome: 'bad_request', status: 415, body: { code: 'unsupported_content_encoding', message: 'Request body cannot be inspected: {reason}.' } }),
  /** A path the relay could route on as another (malformed escape, dot segment): nothing more is read on that connection. */
  BAD_PATH: refusal({ outcome: 'bad_request', status: 400, body: BAD_REQUEST_BODY, close: true }),
  BAD_REQUEST: refusal({ outcome: 'bad_request', status: 400, body: BAD_REQUEST_BODY }),
  /** The bodies in flight hold their whole memory budget (bodyBudgetBytes), or the client address its share of it. */
  BUSY: refusal({
    outcome: 'busy',
    status: 503,
    body: { code: 'gateway_busy', message: 'The gateway is holding as many request bodies as its memory budget allows; retry in a moment.' },
    headers: () => RETRY_SOON,
  }),
  /** The request did not arrive in full within server.requestTimeoutSeconds. */
  REQUEST_TIMEOUT: refusal({
    outcome: 'request_timeout',
    status: 408,
    body: { code: 'request_timeout', message: 'The request did not arrive in full within {seconds} seconds.' },
    close: true,
  }),
  /** The key store (Redis) could not be asked and the key was not seen recently, or a limit needed it (limits.onStoreError: closed). */
  STORE_UNAVAILABLE: refusal({ outcome: 'store_unavailable', status: 503, body: STORE_UNAVAILABLE_BODY, headers: () => RETRY_SOON }),
  /** Unknown keys at the replica's lookup ceiling: the key may be a valid new one. Retry-After says when there is room. */
  LOOKUP_CEILING: refusal({ outcome: 'store_unavailable', status: 503, body: STORE_UNAVAILABLE_BODY, headers: retryAfter }),
  /** Unknown keys while auth.unknownKeyLookupBurst requests already wait for their addresses' lookups: the same 503. */
  LOOKUP_QUEUE_FULL: refusal({ outcome: 'store_unavailable', status: 503, body: STORE_UNAVAILABLE_BODY, headers: retryAfter }),
  /** The relay's database could not be asked and the key was not seen recently: the client gets the store's 503, operators see which. */
  RELAY_DB_UNAVAILABLE: refusal({ outcome: 'relay_db_unavailable', status: 503, body: STORE_UNAVAILABLE_BODY, headers: () => RETRY_SOON }),
  /** The relay could not be reached, failed before answering, or switched protocols unasked. */
  UPSTREAM_UNREACHABLE: refusal({ outcome: 'upstream_error', status: 502, body: UPSTREAM_UNREACHABLE_BODY }),
  /** The relay's response headers did not come within upstream.headersTimeoutSeconds. */
  UPSTREAM_TIMEOUT: refusal({
    outcome: 'upstream_timeout',
    status: 504,
    body: { code: 'upstream_timeout', message: 'The upstream relay did not begin its answer within {seconds} seconds.' },
    headers: () => DO_NOT_RETRY,
  }),
  /** No descriptor left to open a relay connection with. */
  OUT_OF_SOCKETS: refusal({
    outcome: 'out_of_sockets',
    status: 503,
    body: {
      code: 'out_of_sockets',
      message: 'sluice is out of sockets (its file descriptor limit is reached) and could not open a connection to the relay; the relay itself may be fine. Retry shortly.',
    },
    headers: () => RETRY_SOON,
  }),
  /** A fault of sluice's own. */
  INTERNAL: refusal({ outcome: 'internal_error', status: 500, body: { code: 'internal_error', message: 'The gateway failed to handle this request.' }, close: true }),
} as const);

/** The outcomes a refusal is counted as. */
export type RefusalOutcome = (typeof Refusals)[keyof typeof Refusals]['outcome'];

/**
 * What Node's parser leaves sluice to answer before there is a request (the server's
 * 'clientError'): bare, the connection closed once written, no outcome (no request was read).
 * A request the gateway is already reading gets REQUEST_TIMEOUT instead of HEADERS_TIMEOUT.
 */
export const SocketRefusals = Object.freeze({
  HEADERS_TIMEOUT: { status: 408, reason: 'Request Timeout' },
  HEADERS_TOO_LARGE: { status: 431, reason: 'Request Header Fields Too Large' },
  MALFORMED: { status: 400, reason: 'Bad Request' },
} as const);

export type SocketRefusal = (typeof SocketRefusals)[keyof typeof SocketRefusals];

/** The bytes of a socket refusal. */
export function socketRefusalBytes(r: SocketRefusal): string {
  return `HTTP/1.1 ${r.status} ${r.reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`;
}

export interface SendOptions {
  /** Fields that lead the refusal's own (the relay's CORS fields, to a cross-origin call). */
  cors?: Fields;
  /**
   * The caller reads and drops the rest of a body of declared length, so the connection can stay
   * open: a client still uploading then reads this answer instead of a reset (closing a socket
   * with unread bytes makes the kernel answer RST, which can discard the answer unread).
   */
  dropsRest?: boolean;
}

/** How a refusal is sent: options, which must carry its params when it takes any. */
export type RefusalArgs<P> = unknown extends P ? [opts?: SendOptions] : [opts: SendOptions & { params: P }];

/**
 * A request body not read yet: answering and keeping the connection would make Node read and
 * discard the rest of it however long it is, so an answer given before the body (401, 429, 413)
 * closes the connection instead, unless the caller reads and drops the rest itself (`dropsRest`:
 * src/gateway.ts does for a refused small body on a keep-alive connection, and for the budget's 503).
 */
function bodyUnread(res: ServerResponse): boolean {
  const req = res.req as IncomingMessage | undefined;
  return req !== undefined && !req.complete && announcesBytes(req);
}

/** Writes a refusal; a response already begun (or gone) is destroyed instead. */
export function sendRefusal<P>(res: ServerResponse, r: Refusal<string, P>, requestId: string, ...[opts]: RefusalArgs<P>): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const { cors, dropsRest, params } = (opts ?? {}) as SendOptions & { params?: P };
  const headers: Record<string, string | number> = { 'x-oneapi-request-id': requestId, ...cors, ...r.headers(params as P) };
  if (r.close || (!dropsRest && bodyUnread(res))) headers['connection'] = 'close';
  if (r.body === null) {
    headers['content-length'] = 0;
    res.writeHead(r.status, headers);
    res.end();
    return;
  }
  const message = `${formatMessage(r.body.message, params as Readonly<Record<string, unknown>> | undefined)} (request id: ${requestId})`;
  // JSON.stringify keeps insertion order, which is Go's sorted order here.
  const body = JSON.stringify({ error: { code: r.body.code, message, type: 'new_api_error' } });
  headers['content-type'] = 'application/json';
  headers['content-length'] = Buffer.byteLength(body);
  res.writeHead(r.status, headers);
  res.end(body);
}
