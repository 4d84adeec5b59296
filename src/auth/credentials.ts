/**
 * Which request headers carry a key on which path (contract §5). Pure: the
 * header matrix is decided here and nowhere else.
 */
import type { IncomingHttpHeaders } from 'node:http';

export interface CredentialRules {
  /** `x-api-key` counts (the messages protocol): `/v1/messages` and `/v1/models` and below. */
  xApiKey: boolean;
  /** `x-goog-api-key` counts (the native generative-content protocol): `/v1beta/models` and below. */
  xGoogApiKey: boolean;
}

function under(path: string, prefix: string): boolean {
  return path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 0x2f /* / */);
}

export function credentialRules(path: string): CredentialRules {
  return {
    xApiKey: under(path, '/v1/messages') || under(path, '/v1/models'),
    xGoogApiKey: under(path, '/v1beta/models'),
  };
}

/**
 * The key candidates a request presents in headers that count on its path.
 * An empty array means no counting header at all. A header that counts but
 * holds no usable key yields an empty string, which can never authenticate:
 * a wrong key beside a valid one still fails.
 */
export function presentedKeys(headers: IncomingHttpHeaders, rules: CredentialRules): string[] {
  const out: string[] = [];
  const auth = headers.authorization;
  if (auth !== undefined) out.push(bearerToken(auth));
  if (rules.xApiKey) {
    const v = headers['x-api-key'];
    if (v !== undefined) out.push(single(v).trim());
  }
  if (rules.xGoogApiKey) {
    const v = headers['x-goog-api-key'];
    if (v !== undefined) out.push(single(v).trim());
  }
  return out;
}

function single(v: string | string[]): string {
  // Node joins repeated custom headers with ", "; a repeated key header is ambiguous, so it cannot match a key.
  return Array.isArray(v) ? v.join(', ') : v;
}

/** `Bearer <token>`, scheme case-insensitive; anything else yields "". */
export function bearerToken(value: string): string {
  const v = value.trim();
  if (v.length < 7 || v.slice(0, 6).toLowerCase() !== 'bearer' || (v[6] !== ' ' && v[6] !== '\t')) return '';
  return v.slice(7).trim();
}
