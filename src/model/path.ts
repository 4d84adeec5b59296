/**
 * Endpoints that name the model in the URL path instead of the body.
 *
 * The relay (Go net/http + gin) routes and extracts on the percent-decoded path, decoded once.
 * That decoding is parseTarget's (src/target.ts): the path given here is `Target.path`, already
 * decoded, and is read as it is. Decoding it again would read `a%2525b` as `a%b` where the relay
 * serves `a%25b`, and `a%253AgenerateContent` as the model `a` where the relay serves
 * `a%3AgenerateContent`.
 */

const GEMINI_BETA = '/v1beta/models/';
const GEMINI_V1 = '/v1/models/';
const ENGINES = '/v1/engines/';

/** The model a decoded path (`Target.path`) names, if it is one of the endpoints that name one. */
export function modelFromPath(path: string): string | undefined {
  if (path.startsWith(GEMINI_BETA)) {
    // Without an action this is the model-info route; the relay still reads the model from it.
    return nonEmpty(beforeColon(path.slice(GEMINI_BETA.length)));
  }
  if (path.startsWith(GEMINI_V1)) {
    // `/v1/models/{id}` without an action is OpenAI's model retrieval, not a generation.
    const rest = path.slice(GEMINI_V1.length);
    const colon = rest.indexOf(':');
    return colon === -1 ? undefined : nonEmpty(rest.slice(0, colon));
  }
  if (path.startsWith(ENGINES)) {
    // Only `/v1/engines/{model}/...` (legacy embeddings) generates; `/v1/engines/{id}` retrieves.
    const rest = path.slice(ENGINES.length);
    const slash = rest.indexOf('/');
    return slash === -1 ? undefined : nonEmpty(rest.slice(0, slash));
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
