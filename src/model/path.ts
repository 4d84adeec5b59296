/**
 * Models named in the URL path, read as the relay's distributor reads them.
 *
 * The relay (Go net/http + gin) routes and extracts on the percent-decoded path, decoded once.
 * That decoding is parseTarget's (src/routing/target.ts): the path given here is `Target.path`, already
 * decoded, and is read as it is. Decoding it again would read `a%2525b` as `a%b` where the relay
 * serves `a%25b`, and `a%253AgenerateContent` as the model `a` where the relay serves
 * `a%3AgenerateContent`.
 */

const MODELS = '/models/';
const ENGINES = '/v1/engines/';
const EMBEDDINGS = '/embeddings';

/**
 * The model of a `/v1beta/models/*` or `/v1/models/*` POST: what follows the first `/models/`, up
 * to the first colon (`/v1beta/models/{model}:{action}`), all of it when there is no colon, as
 * new-api's extractModelNameFromGeminiPath does. Undefined when that is empty.
 */
export function geminiPathModel(path: string): string | undefined {
  const at = path.indexOf(MODELS);
  if (at === -1) return undefined;
  const rest = path.slice(at + MODELS.length);
  const colon = rest.indexOf(':');
  return nonEmpty(colon === -1 ? rest : rest.slice(0, colon));
}

/** The `{model}` of `/v1/engines/{model}/embeddings` (one path segment), which the relay falls back on. */
export function engineModel(path: string): string | undefined {
  if (!path.startsWith(ENGINES) || !path.endsWith(EMBEDDINGS)) return undefined;
  const segment = path.slice(ENGINES.length, path.length - EMBEDDINGS.length);
  return segment.includes('/') ? undefined : nonEmpty(segment);
}

/** The model a POST to this decoded path names in the path, if it is one of the routes that name one there. */
export function modelFromPath(path: string): string | undefined {
  if (path.startsWith('/v1beta/models/') || path.startsWith('/v1/models/')) return geminiPathModel(path);
  return engineModel(path);
}

function nonEmpty(segment: string): string | undefined {
  return segment === '' ? undefined : segment;
}
