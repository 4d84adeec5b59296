/**
 * Endpoints that name the model in the URL path instead of the body.
 *
 * The relay (Go net/http + gin) routes and extracts on the percent-decoded path, so the whole
 * path is decoded before it is split: otherwise `gemini-pro%3AgenerateContent` would read here
 * as the model `gemini-pro:generateContent` while the relay serves `gemini-pro`.
 */

const GEMINI_BETA = '/v1beta/models/';
const GEMINI_V1 = '/v1/models/';
const ENGINES = '/v1/engines/';

export function modelFromPath(pathname: string): string | undefined {
  const decoded = percentDecode(pathname);
  if (decoded !== undefined) return extract(decoded, (segment) => segment);
  // Go's server answers 400 to a malformed path, so this fallback only has to be harmless.
  return extract(pathname, (segment) => percentDecode(segment) ?? segment);
}

function extract(path: string, decodeSegment: (segment: string) => string): string | undefined {
  if (path.startsWith(GEMINI_BETA)) {
    // Without an action this is the model-info route; the relay still reads the model from it.
    return nonEmpty(decodeSegment(beforeColon(path.slice(GEMINI_BETA.length))));
  }
  if (path.startsWith(GEMINI_V1)) {
    // `/v1/models/{id}` without an action is OpenAI's model retrieval, not a generation.
    const rest = path.slice(GEMINI_V1.length);
    const colon = rest.indexOf(':');
    return colon === -1 ? undefined : nonEmpty(decodeSegment(rest.slice(0, colon)));
  }
  if (path.startsWith(ENGINES)) {
    // Only `/v1/engines/{model}/...` (legacy embeddings) generates; `/v1/engines/{id}` retrieves.
    const rest = path.slice(ENGINES.length);
    const slash = rest.indexOf('/');
    return slash === -1 ? undefined : nonEmpty(decodeSegment(rest.slice(0, slash)));
  }
  return undefined;
}

function beforeColon(rest: string): string {
  const colon = rest.indexOf(':');
  return colon === -1 ? rest : rest.slice(0, colon);
}

function nonEmpty(segment: string): string | undefined {
  return segment === '' ? undefined : segment;
}

/**
 * Percent-decodes like Go's url.PathUnescape: any `%XX` becomes that byte (`%2F` included),
 * `+` stays `+`, and a `%` without two hex digits makes the whole input malformed (undefined).
 * Unlike decodeURIComponent it does not throw on decoded bytes that are not UTF-8.
 */
function percentDecode(input: string): string | undefined {
  if (!input.includes('%')) return input;
  const raw = Buffer.from(input, 'utf8');
  const out = Buffer.allocUnsafe(raw.length);
  let length = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== 0x25) {
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
