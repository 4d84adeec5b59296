/**
 * The route table: for each path the relay (new-api) serves, what sluice needs to know about it,
 * in one place:
 * - its metrics family (a bounded label set);
 * - which headers besides `Authorization` carry a key there (contract §5);
 * - whether the relay answers it with its CORS headers (its CORS middleware is global to the relay
 *   routes, but the dashboard `/api/*` routes were registered before it and have none, save the two
 *   usage queries);
 * - how the relay's distributor (middleware/distributor.go) reads the model for each method, as a
 *   plan that src/model/index.ts carries out on the body, the path or the query.
 *
 * Paths are `Target.path`: decoded once, slashes collapsed, no dot segments (src/routing/target.ts).
 *
 * The model routes, as new-api's routers register them behind its distributor:
 * - `/v1/*` (router/relay-router.go): the chat, completions, messages, responses, images, audio,
 *   embeddings, rerank, moderations, edits and alpha-search POSTs, read from the body by
 *   Content-Type; `GET /v1/realtime` from `?model=`; `POST /v1/engines/{model}/embeddings` from the
 *   body, else the path; `POST /v1/models/*` and `/v1beta/models/*` from the path
 *   (`/v1beta/models/{model}:{action}`), unless that path also contains `/mj/`, `/suno/`,
 *   `/v1/videos` or `/v1/video/generations`, which the distributor tests first;
 * - `/pg/chat/completions` (the console's playground);
 * - `/v1/videos`, `/v1/video/generations` (router/video-router.go), Kling's
 *   `/kling/v1/videos/{text2video,image2video}` and Jimeng's `/jimeng/`, which their adapter
 *   middlewares read too;
 * - Midjourney (`/mj/*`, `/{mode}/mj/*`) and Suno (`/suno/submit/{action}`), whose model names the
 *   relay derives from the task's action.
 * Any other POST under `/v1/` matches no route of the relay's: gin answers it 404 (NoRoute) or
 * redirects a trailing slash (307) before any middleware, so no model is read and nothing is
 * counted, as on the relay. Such a route is `unrouted`: the gateway says so when the relay answers
 * one with a success all the same (a newer relay that added a route sluice does not know yet).
 */

/** Route families: a bounded label set derived from the path (every one is exported from start, src/metrics). */
export const ROUTE_FAMILIES = ['chat', 'responses', 'messages', 'gemini', 'models', 'usage_query', 'api', 'dashboard', 'v1_other', 'playground', 'tasks', 'other'] as const;
export type RouteFamily = (typeof ROUTE_FAMILIES)[number];

/**
 * How the relay's distributor reads the model of one route and method:
 * - `body`: `first` is its generic read (JSON or a urlencoded form by Content-Type, nothing when
 *   the Content-Type names multipart; a body it cannot read is answered 400); `second` a further
 *   read by Content-Type, multipart included, that some routes make: `strict` replaces the model
 *   and fails on a bad body, `lenient` replaces it only when it read a non-empty one without error,
 *   `lenient-form` likewise but only for an exact form Content-Type (gin's `c.ContentType()`);
 *   `fallback` is the model when none was read; `engineParam` takes `/v1/engines/{model}/...`'s
 *   model when the body named none;
 * - `path`: `/v1beta/models/{model}:{action}` and `/v1/models/{model}...`, unless the path's
 *   contents send the distributor elsewhere first (resolved per request);
 * - `query`: `?model=` (realtime);
 * - `mj`, `suno`: derived from the task's action; `kling`, `jimeng`: the video task adapters,
 *   which read their own field besides the distributor's `model`.
 */
export type ModelPlan =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'body';
      readonly first: boolean;
      readonly second: 'none' | 'strict' | 'lenient' | 'lenient-form';
      readonly fallback: string | null;
      readonly engineParam: boolean;
    }
  | { readonly kind: 'path' }
  | { readonly kind: 'query' }
  | { readonly kind: 'mj' }
  | { readonly kind: 'suno' }
  | { readonly kind: 'kling' }
  | { readonly kind: 'jimeng' };

export interface Route {
  readonly family: RouteFamily;
  /** `x-api-key` carries a key here (the messages protocol): `/v1/messages` and `/v1/models` and below. */
  readonly xApiKey: boolean;
  /** `x-goog-api-key` carries a key here (the native generative-content protocol): `/v1beta/models` and below. */
  readonly xGoogApiKey: boolean;
  /** The relay adds its CORS headers to its answers here. */
  readonly cors: boolean;
  readonly post: ModelPlan;
  readonly get: ModelPlan;
  /** No route of the relay's (a catch-all under `/v1/`): the relay answers a POST here 404. */
  readonly unrouted: boolean;
}

const NONE: ModelPlan = Object.freeze({ kind: 'none' });

function body(first: boolean, second: 'none' | 'strict' | 'lenient' | 'lenient-form' = 'none', fallback: string | null = null, engineParam = false): ModelPlan {
  return Object.freeze({ kind: 'body', first, second, fallback, engineParam });
}

/** The distributor's generic read: JSON or a urlencoded form, by Content-Type. */
const GENERIC = body(true);
/** Read by Content-Type, multipart included, and a bad body refused (the video task routes). */
const TASK_BODY = body(false, 'strict');
const PATH: ModelPlan = Object.freeze({ kind: 'path' });
const QUERY: ModelPlan = Object.freeze({ kind: 'query' });
const MJ: ModelPlan = Object.freeze({ kind: 'mj' });
const SUNO: ModelPlan = Object.freeze({ kind: 'suno' });
const KLING: ModelPlan = Object.freeze({ kind: 'kling' });
const JIMENG: ModelPlan = Object.freeze({ kind: 'jimeng' });

interface RouteSpec {
  family: RouteFamily;
  unrouted?: true;
  post?: ModelPlan;
  get?: ModelPlan;
}

function route(path: string, spec: RouteSpec): Route {
  return Object.freeze({
    family: spec.family,
    xApiKey: under(path, '/v1/messages') || under(path, '/v1/models'),
    xGoogApiKey: under(path, '/v1beta/models'),
    cors: relayCors(path),
    post: spec.post ?? NONE,
    get: spec.get ?? NONE,
    unrouted: spec.unrouted === true,
  });
}

function under(path: string, prefix: string): boolean {
  return path === prefix || (path.startsWith(prefix) && path.charCodeAt(prefix.length) === 0x2f) /* / */;
}

/**
 * Whether the relay's answers on `path` carry its CORS headers: everywhere but the dashboard's
 * `/api/*` routes, save `/api/usage/*` and `/api/log/token`, which add the middleware themselves.
 */
function relayCors(path: string): boolean {
  if (!path.startsWith('/api/')) return true;
  return path.startsWith('/api/usage/') || path === '/api/log/token';
}

/** The relay's exact model routes (POST unless said otherwise). */
const EXACT = new Map<string, Route>();
function exact(path: string, spec: RouteSpec): void {
  EXACT.set(path, route(path, spec));
}

exact('/v1/chat/completions', { family: 'chat', post: GENERIC });
exact('/v1/completions', { family: 'chat', post: GENERIC });
exact('/v1/messages', { family: 'messages', post: GENERIC });
exact('/v1/responses', { family: 'responses', post: GENERIC });
// The relay appends `-openai-compact` to the model it routes on (unless the client named that id):
// the free rule takes a free id's compact variant as free (src/limits/model-fold.ts).
exact('/v1/responses/compact', { family: 'responses', post: GENERIC });
for (const p of ['/v1/alpha/search', '/v1/edits', '/v1/embeddings', '/v1/rerank', '/v1/images/variations', '/v1/files', '/v1/fine-tunes']) {
  exact(p, { family: 'v1_other', post: GENERIC });
}
exact('/v1/images/generations', { family: 'v1_other', post: body(true, 'none', 'dall-e') });
exact('/v1/images/edits', { family: 'v1_other', post: body(true, 'lenient-form') });
exact('/v1/moderations', { family: 'v1_other', post: body(true, 'none', 'text-moderation-stable') });
exact('/v1/audio/speech', { family: 'v1_other', post: body(true, 'none', 'tts-1') });
// Transcriptions skip the generic read; both audio uploads read the body again, multipart included, ignoring failures.
exact('/v1/audio/transcriptions', { family: 'v1_other', post: body(false, 'lenient', 'whisper-1') });
exact('/v1/audio/translations', { family: 'v1_other', post: body(true, 'lenient', 'whisper-1') });
exact('/v1/realtime', { family: 'v1_other', get: QUERY, unrouted: true });
exact('/v1/videos', { family: 'v1_other', post: TASK_BODY });
exact('/v1/video/generations', { family: 'v1_other', post: TASK_BODY });
exact('/pg/chat/completions', { family: 'playground', post: body(true, 'strict') });
exact('/kling/v1/videos/text2video', { family: 'tasks', post: KLING });
exact('/kling/v1/videos/image2video', { family: 'tasks', post: KLING });
exact('/jimeng/', { family: 'tasks', post: JIMENG });

// Families of the paths that are no model route.
// gin has no POST route here, nor a redirect to `/v1/models/` (its `/:mode` backtracking cancels it): a 404.
const MODELS_LIST = route('/v1/models', { family: 'models', unrouted: true });
const MODELS_ITEM = route('/v1/models/x', { family: 'models', post: PATH });
const GEMINI_MODELS = route('/v1beta/models/x', { family: 'gemini', post: PATH });
const GEMINI_LIST = route('/v1beta/models', { family: 'gemini' });
const GEMINI_OTHER = route('/v1beta/x', { family: 'gemini' });
const ENGINE_EMBEDDINGS = route('/v1/engines/x/embeddings', { family: 'v1_other', post: body(true, 'none', null, true) });
const FINE_TUNE_CANCEL = route('/v1/fine-tunes/x/cancel', { family: 'v1_other', post: GENERIC });
const V1_OTHER = route('/v1/x', { family: 'v1_other', unrouted: true });
const CHAT_OTHER = route('/v1/chat/x', { family: 'chat', unrouted: true });
const RESPONSES_OTHER = route('/v1/responses/x', { family: 'responses', unrouted: true });
const MESSAGES_OTHER = route('/v1/messages/x', { family: 'messages', unrouted: true });
const VIDEO_REMIX = route('/v1/videos/x/remix', { family: 'v1_other' });
const VIDEO_FETCH = route('/v1/videos/x', { family: 'v1_other' });
const DASHBOARD = route('/v1/dashboard/x', { family: 'dashboard' });
const USAGE_QUERY = route('/api/log/token', { family: 'usage_query' });
const API = route('/api/x', { family: 'api' });
const API_CORS = route('/api/usage/x', { family: 'api' });
const MJ_ROUTE = route('/mj/x', { family: 'tasks', post: MJ });
const SUNO_ROUTE = route('/suno/x', { family: 'tasks', post: SUNO });
const TASKS_OTHER = route('/kling/x', { family: 'tasks' });
const PLAYGROUND_OTHER = route('/pg/x', { family: 'playground' });
const OTHER = route('/x', { family: 'other' });
EXACT.set('/v1/models', MODELS_LIST);
EXACT.set('/v1beta/models', GEMINI_LIST);
EXACT.set('/api/log/token', USAGE_QUERY);
EXACT.set('/api/usage/token/', USAGE_QUERY);

/** Whether the path is a Midjourney route: `/mj/...` or `/{mode}/mj/...` (gin's `/:mode/mj` group). */
function isMidjourney(path: string): boolean {
  if (path.startsWith('/mj/')) return true;
  // gin's `:mode` matches an empty segment too (`//mj/...`, from `/%2Fmj/...`).
  const second = path.indexOf('/', 1);
  return second !== -1 && path.startsWith('/mj/', second);
}

/** The route of a decoded path. Allocates nothing: every answer is a shared, frozen Route. */
export function routeOf(path: string): Route {
  const hit = EXACT.get(path);
  if (hit !== undefined) return hit;
  // Midjourney's `/:mode/mj` group matches any first segment, `/v1` and `/api` included.
  if (isMidjourney(path)) return MJ_ROUTE;
  // The relay's alias of /v1/dashboard/billing/*.
  if (path.startsWith('/dashboard/billing/')) return DASHBOARD;
  if (path.startsWith('/v1/')) {
    if (path.startsWith('/v1/chat/')) return CHAT_OTHER;
    if (path.startsWith('/v1/responses/')) return RESPONSES_OTHER;
    if (path.startsWith('/v1/messages/')) return MESSAGES_OTHER;
    if (path.startsWith('/v1/models/')) return MODELS_ITEM;
    if (path.startsWith('/v1/dashboard/')) return DASHBOARD;
    if (path.startsWith('/v1/engines/') && path.endsWith('/embeddings') && path.indexOf('/', 12) === path.length - 11) return ENGINE_EMBEDDINGS;
    if (path.startsWith('/v1/videos/')) return path.endsWith('/remix') ? VIDEO_REMIX : VIDEO_FETCH;
    if (path.startsWith('/v1/video/generations/')) return VIDEO_FETCH;
    // gin's `/fine-tunes/:id/cancel`: one segment between (an empty one too).
    if (path.startsWith('/v1/fine-tunes/') && path.endsWith('/cancel') && path.indexOf('/', 15) === path.length - 7) return FINE_TUNE_CANCEL;
    return V1_OTHER;
  }
  if (path.startsWith('/v1beta/')) return path.startsWith('/v1beta/models/') ? GEMINI_MODELS : GEMINI_OTHER;
  if (path.startsWith('/api/')) return path.startsWith('/api/usage/') ? API_CORS : API;
  if (path.startsWith('/suno/')) return SUNO_ROUTE;
  if (path.startsWith('/kling/') || path.startsWith('/jimeng')) return TASKS_OTHER;
  if (path.startsWith('/pg/')) return PLAYGROUND_OTHER;
  return OTHER;
}

/** The plan for a method on a route (most model routes are POST; realtime is a GET). */
export function planFor(route: Route, method: string): ModelPlan {
  return method === 'POST' ? route.post : method === 'GET' ? route.get : NONE;
}

/**
 * What the distributor does on a `/v1/models/*` or `/v1beta/models/*` POST: it tests the path for
 * the task routes' markers before it reads the model from the path, so such a path can make it
 * read the body instead.
 */
export function wildcardPlan(path: string): ModelPlan {
  if (path.includes('/mj/')) return MJ;
  if (path.includes('/suno/')) return SUNO;
  if (path.includes('/v1/videos/') && path.endsWith('/remix')) return NONE;
  if (path.includes('/v1/videos') || path.includes('/v1/video/generations')) return TASK_BODY;
  return PATH;
}
