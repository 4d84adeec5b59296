/**
 * The catalogue of every answer sluice gives on its own behalf, with stable
 * codes and statuses (in the spirit of Fastify's errors.js and undici's
 * lib/core/errors.js): one entry per condition.
 *
 * - `Errors`: the public listener's answers. Bodies follow the relay's shape byte for byte: Go's
 *   encoder sorts keys, so `code`, `message`, `type`; the message ends with `(request id: <id>)`.
 * - `AdminErrors`: the admin listener's answers, `{"error":{"code","message"}}`, thrown as an
 *   `AdminError` by the admin API and the key operations it shares with the command line.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface ErrorSpec {
  readonly status: number;
  /** `error.code` in the body; empty for authentication failures, as the relay does. */
  readonly code: string;
  readonly type: string;
  readonly message: string;
  /** When false the answer has an empty body (the per-IP 429 of the contract). */
  readonly json: boolean;
}

const spec = (status: number, code: string, message: string, type = 'new_api_error', json = true): ErrorSpec =>
  Object.freeze({ status, code, type, message, json });

export const Errors = Object.freeze({
  /** Contract §2/§5: the text says authentication did not pass, that the error alone cannot tell whether the gateway key or an upstream credential is at fault, and that it does not prove the key invalid. */
  UNAUTHORIZED: spec(
    401,
    '',
    '请求认证未通过：仅凭此错误无法判断是网关 API 密钥还是上游凭据的问题，也不能证明该密钥无效，请检查所用的认证头与密钥',
  ),
  FREE_TIER_RATE_LIMITED: spec(
    429,
    'free_tier_rate_limited',
    'Free-tier rate limit exceeded: at most {limit} requests per {window} seconds across all free models. Retry after {retryAfter} seconds, or switch to the paid counterpart of the model for stable use.',
  ),
  FREE_TIER_DAILY_EXHAUSTED: spec(
    402,
    'free_tier_daily_exhausted',
    'Free-tier daily limit of {limit} requests reached across all free models; it resets at 00:00 {timeZone}. Switch to the paid counterpart of the model for stable use.',
  ),
  FREE_TIER_EXHAUSTED: spec(
    402,
    'free_tier_exhausted',
    'The upstream free tier is momentarily rate limited at peak times (unrelated to your daily limit). Back off 30 to 60 seconds, then retry, or switch to the paid counterpart of the model.',
  ),
  IP_RATE_LIMITED: spec(429, 'ip_rate_limited', '', 'new_api_error', false),
  BODY_TOO_LARGE: spec(413, 'request_body_too_large', 'Request body exceeds the limit of {limit} bytes.'),
  UNSUPPORTED_ENCODING: spec(415, 'unsupported_content_encoding', 'Request body cannot be inspected: {reason}.'),
  BAD_REQUEST: spec(400, 'invalid_request', 'Invalid request: {reason}.'),
  DECODED_BODY_TOO_LARGE: spec(
    413,
    'request_body_too_large',
    'Request body exceeds the limit of {limit} bytes once its content-encoding is undone; send it uncompressed (up to the body limit) or smaller.',
  ),
  REQUEST_TIMEOUT: spec(408, 'request_timeout', 'The request did not arrive in full within {seconds} seconds.'),
  BODIES_BUSY: spec(503, 'gateway_busy', 'The gateway is holding as many request bodies as its memory budget allows; retry in a moment.'),
  UPSTREAM_UNREACHABLE: spec(502, 'upstream_unreachable', 'The upstream relay could not be reached or failed before answering.'),
  UPSTREAM_TIMEOUT: spec(504, 'upstream_timeout', 'The upstream relay did not begin its answer within {seconds} seconds.'),
  OUT_OF_SOCKETS: spec(
    503,
    'out_of_sockets',
    'sluice is out of sockets (its file descriptor limit is reached) and could not open a connection to the relay; the relay itself may be fine. Retry shortly.',
  ),
  STORE_UNAVAILABLE: spec(503, 'store_unavailable', 'The gateway cannot reach its key and limit store right now; retry shortly.'),
  INTERNAL: spec(500, 'internal_error', 'The gateway failed to handle this request.'),
} as const);

/** An answer of the admin listener: its status, its stable code and its message (`{name}` filled from params). */
export interface AdminErrorSpec {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

const adminSpec = (status: number, code: string, message: string): AdminErrorSpec => Object.freeze({ status, code, message });

export const AdminErrors = Object.freeze({
  NOT_FOUND: adminSpec(404, 'not_found', 'no such admin endpoint'),
  UNAUTHORIZED: adminSpec(401, 'unauthorized', 'missing or wrong admin token'),
  DISABLED: adminSpec(401, 'unauthorized', 'the admin API is disabled: set SLUICE_ADMIN_TOKEN'),
  MALFORMED_URL: adminSpec(400, 'bad_request', 'malformed request URL'),
  BODY_TOO_LARGE: adminSpec(413, 'body_too_large', 'admin request bodies are limited to {limit} bytes'),
  INVALID_JSON: adminSpec(400, 'invalid_json', 'request body is not valid JSON'),
  INVALID_BODY: adminSpec(400, 'invalid_body', 'body must be a JSON object {"user","name"?,"key"?}'),
  UNKNOWN_FIELD: adminSpec(400, 'unknown_field', 'unknown field "{field}"'),
  INVALID_USER: adminSpec(400, 'invalid_user', 'a user id ("user") must be 1-128 characters of letters, digits and _ . @ : + -'),
  INVALID_KEY_ID: adminSpec(400, 'invalid_key_id', 'a key id must be 1-128 characters of letters, digits and _ . @ : + -'),
  INVALID_NAME: adminSpec(400, 'invalid_name', '"name" must be a string of at most 200 characters'),
  INVALID_KEY: adminSpec(400, 'invalid_key', '{reason}'),
  KEY_EXISTS: adminSpec(409, 'key_exists', 'that key is already registered'),
  MISSING_USER: adminSpec(400, 'missing_user', 'query parameter "user" is required'),
  KEY_NOT_FOUND: adminSpec(404, 'key_not_found', 'no key with that id'),
  INVALID_LOOKUP: adminSpec(400, 'invalid_body', 'body must be a JSON object {"key": "<the key>"}: the key as a string of at most 1024 characters'),
  INVALID_ADDRESS: adminSpec(400, 'invalid_address', 'the path must name an IPv4 or IPv6 address (percent-encoded if need be, e.g. /admin/ips/2001:db8::5/limits)'),
  /** The store failed to answer (a StoreUnavailableError): the caller may retry. */
  STORE_UNAVAILABLE: adminSpec(503, 'store_unavailable', 'the store could not be reached'),
  /** Anything else: sluice's own fault, logged; retrying will not help. */
  INTERNAL: adminSpec(500, 'internal_error', 'the admin request failed; the admin log has the cause'),
} as const);

/** An admin or key-operation refusal, as the catalogue describes it. */
export class AdminError extends Error {
  override name = 'AdminError';
  readonly status: number;
  readonly code: string;
  constructor(spec: AdminErrorSpec, params?: Record<string, string | number>) {
    super(formatMessage(spec.message, params));
    this.status = spec.status;
    this.code = spec.code;
  }
}

function formatMessage(template: string, params: Record<string, string | number> = {}): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => (k in params ? String(params[k]) : m));
}

/** The exact body bytes the relay would write for this error. */
function errorBody(err: ErrorSpec, requestId: string, params?: Record<string, string | number>): string {
  const message = `${formatMessage(err.message, params)} (request id: ${requestId})`;
  // JSON.stringify keeps insertion order, which is Go's sorted order here.
  return JSON.stringify({ error: { code: err.code, message, type: err.type } });
}

export interface SendErrorOptions {
  params?: Record<string, string | number>;
  headers?: Record<string, string>;
  /** Close the connection afterwards (also done, whatever this says, when the request body is unread). */
  close?: boolean;
  /**
   * The caller reads and drops the rest of a body of declared length, so the connection can stay
   * open: a client still uploading then reads this answer instead of a reset (closing a socket
   * with unread bytes makes the kernel answer RST, which can discard the answer unread).
   */
  dropsRest?: boolean;
}

/**
 * A request body not read yet: answering and keeping the connection would make Node read and
 * discard the rest of it however long it is, so an answer given before the body (401, 429, 413)
 * closes the connection instead, unless the caller reads and drops the rest itself (`dropsRest`:
 * src/gateway.ts does for a refused small body on a keep-alive connection, and for the budget's 503).
 */
function bodyUnread(res: ServerResponse): boolean {
  const req = res.req as IncomingMessage | undefined;
  if (req === undefined || req.complete) return false;
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
}

export function sendError(res: ServerResponse, err: ErrorSpec, requestId: string, opts: SendErrorOptions = {}): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const headers: Record<string, string | number> = { 'x-oneapi-request-id': requestId, ...opts.headers };
  if (opts.close || (!opts.dropsRest && bodyUnread(res))) headers['connection'] = 'close';
  if (!err.json) {
    headers['content-length'] = 0;
    res.writeHead(err.status, headers);
    res.end();
    return;
  }
  const body = errorBody(err, requestId, opts.params);
  headers['content-type'] = 'application/json';
  headers['content-length'] = Buffer.byteLength(body);
  res.writeHead(err.status, headers);
  res.end(body);
}

/** A start-up problem an operator must fix; the message names the setting. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A request body (raw or decoded) would take the bodies in flight past their memory budget. */
export class BodyBudgetExceededError extends Error {
  override name = 'BodyBudgetExceededError';
}

/** The store could not answer and the configured policy is to fail closed. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
  constructor(override readonly cause: unknown) {
    super(`store unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}
