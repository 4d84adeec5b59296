/**
 * The admin listener's answers, with stable codes and statuses (in the spirit of Fastify's
 * errors.js and undici's lib/core/errors.js), one entry per condition: `{"error":{"code","message"}}`,
 * thrown as an `AdminError` by the admin API and the key operations it shares with the command
 * line. The public listener's answers are the refusal table (src/answers/refusals.ts).
 */
import { formatMessage } from '../answers/template.js';

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
