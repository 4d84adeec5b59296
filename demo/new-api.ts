/**
 * What the relay stand-in (relay.ts) knows of new-api's request handling, written from new-api's
 * own code (router/relay-router.go, router/video-router.go, middleware/distributor.go,
 * middleware/auth.go, middleware/cors.go, common/gin.go, controller/model.go) so that a client, or
 * sluice in front, cannot tell the stand-in from the relay where these matter:
 * - which key new-api authenticates, from which header, and the channel a `-<n>` after it asks
 *   for (TokenAuth);
 * - which model its distributor reads, from the route, the Content-Type and the body, and the
 *   400s it answers when it cannot;
 * - its CORS headers on preflights and on ordinary answers;
 * - the list shapes of `GET /v1/models` chosen by headers, and of `GET /v1beta/models`.
 *
 * This is an independent model of the relay, deliberately not sluice's own reader
 * (src/model/*): tests compare what the stand-in read with what sluice counted. Node built-ins
 * only.
 */
import type { IncomingHttpHeaders } from 'node:http';

// ---------------------------------------------------------------------------------------------
// Paths

/** The path as gin routes it: percent-decoded once (undecodable escapes kept as they are). */
export function routingPath(rawPath: string): string {
  if (!rawPath.includes('%')) return rawPath;
  const bytes: number[] = [];
  for (let i = 0; i < rawPath.length; i++) {
    const c = rawPath.charCodeAt(i);
    if (c === 0x25 && /^[0-9a-fA-F]{2}$/.test(rawPath.slice(i + 1, i + 3))) {
      bytes.push(parseInt(rawPath.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      for (const b of Buffer.from(rawPath[i]!, 'utf8')) bytes.push(b);
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Go's url.ParseQuery over a string: pairs, and whether any pair failed (a `;`, a bad escape). */
export function goParseQuery(s: string): { pairs: Array<[string, string]>; error: boolean } {
  const pairs: Array<[string, string]> = [];
  let error = false;
  const queryUnescape = (v: string): string | null => {
    const bytes: number[] = [];
    for (let i = 0; i < v.length; i++) {
      const ch = v[i]!;
      if (ch === '+') bytes.push(0x20);
      else if (ch === '%') {
        const hex = v.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(hex)) return null;
        bytes.push(parseInt(hex, 16));
        i += 2;
      } else for (const b of Buffer.from(ch, 'latin1')) bytes.push(b);
    }
    return Buffer.from(bytes).toString('utf8');
  };
  for (const pair of s.split('&')) {
    if (pair.includes(';')) {
      error = true;
      continue;
    }
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = queryUnescape(eq === -1 ? pair : pair.slice(0, eq));
    const v = queryUnescape(eq === -1 ? '' : pair.slice(eq + 1));
    if (k === null || v === null) {
      error = true;
      continue;
    }
    pairs.push([k, v]);
  }
  return { pairs, error };
}

/** gin's `c.Query(name)`: the first value, pairs Go cannot parse left out. */
export function ginQuery(rawQuery: string, name: string): string {
  return goParseQuery(rawQuery).pairs.find(([k]) => k === name)?.[1] ?? '';
}

// ---------------------------------------------------------------------------------------------
// TokenAuth: the key new-api reads

function header(h: IncomingHttpHeaders, name: string): string {
  const v = h[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

/**
 * The token new-api's TokenAuth would validate (after `Bearer `), or '' when none: a
 * `Sec-WebSocket-Protocol` overrides `Authorization`, `x-api-key` overrides both on paths
 * containing `/v1/messages` or `/v1/models`, and `?key=` then `x-goog-api-key` override all under
 * `/v1beta/models`, `/v1beta/openai/models` and `/v1/models/`.
 */
export function tokenAuthKey(path: string, rawQuery: string, h: IncomingHttpHeaders): string {
  let auth = header(h, 'authorization');
  const wsp = header(h, 'sec-websocket-protocol');
  if (wsp !== '') {
    let key = wsp;
    for (const part of wsp.split(',')) {
      const p = part.trim();
      if (p.startsWith('openai-insecure-api-key')) {
        key = p.replace(/^openai-insecure-api-key\./, '');
        break;
      }
    }
    auth = `Bearer ${key}`;
  }
  if (path.includes('/v1/messages') || path.includes('/v1/models')) {
    const x = header(h, 'x-api-key');
    if (x !== '') auth = `Bearer ${x}`;
  }
  if (path.startsWith('/v1beta/models') || path.startsWith('/v1beta/openai/models') || path.startsWith('/v1/models/')) {
    const q = ginQuery(rawQuery, 'key');
    if (q !== '') auth = `Bearer ${q}`;
    const g = header(h, 'x-goog-api-key');
    if (g !== '') auth = `Bearer ${g}`;
  }
  if (auth.startsWith('Bearer ') || auth.startsWith('bearer ')) auth = auth.slice(7).trim();
  if (auth === '' || auth === 'midjourney-proxy') {
    auth = header(h, 'mj-api-secret');
    if (auth.startsWith('Bearer ') || auth.startsWith('bearer ')) auth = auth.slice(7).trim();
  }
  return auth;
}

/**
 * What TokenAuth does with the token once it has it: one leading `sk-` trimmed, then split on
 * `-`. The first part is the key it looks up (model.ValidateUserToken); a second part asks for
 * that channel (SetupContextForToken), which only an administrator's token may: anyone else gets
 * 403 with CHANNEL_FORBIDDEN. Further parts are ignored.
 */
export function tokenKeyParts(token: string): { key: string; channel: string | null } {
  const parts = (token.startsWith('sk-') ? token.slice(3) : token).split('-');
  return { key: parts[0]!, channel: parts.length > 1 ? parts[1]! : null };
}

/** SetupContextForToken's answer (403) to a channel asked for by a token not an administrator's. */
export const CHANNEL_FORBIDDEN = '普通用户不支持指定渠道';

/**
 * Whether TokenAuth (and so SetupContextForToken) runs on this path: the relay routes under
 * `/v1`, `/v1beta`, `/suno`, `/kling`, `/jimeng`, Midjourney's `/mj` and `/<mode>/mj`, and the
 * dashboard's `/dashboard/billing`. Not `/pg` (the console's session) nor `/api/*` (the usage
 * endpoints' TokenAuthReadOnly looks the key up the same way but asks for no channel).
 */
export function runsTokenAuth(path: string): boolean {
  return /^\/(v1|v1beta|suno|kling|jimeng|dashboard)\//.test(path) || /^(\/[^/]+)?\/mj\//.test(path);
}

// ---------------------------------------------------------------------------------------------
// CORS (gin-contrib/cors as new-api configures it)

export const CORS_PREFLIGHT_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-credentials': 'true',
  'access-control-allow-headers': '*',
  'access-control-allow-methods': 'GET,POST,PUT,DELETE,OPTIONS',
  'access-control-allow-origin': '*',
  'access-control-max-age': '43200',
});

export const CORS_NORMAL_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-credentials': 'true',
  'access-control-allow-origin': '*',
});

/** The middleware acts on a request with an Origin other than `http(s)://` + its Host. */
export function isCorsRequest(h: IncomingHttpHeaders): boolean {
  const origin = header(h, 'origin');
  if (origin === '') return false;
  const host = header(h, 'host');
  return origin !== `http://${host}` && origin !== `https://${host}`;
}

/**
 * Whether the relay's route for this path runs the CORS middleware: every relay route and every
 * unrouted path do; the dashboard's `/api/*` routes, registered before it, do not, save
 * `/api/usage/*` and `/api/log/token`.
 */
export function routeHasCors(path: string): boolean {
  return !path.startsWith('/api/') || path.startsWith('/api/usage/') || path === '/api/log/token';
}

// ---------------------------------------------------------------------------------------------
// The distributor: which model new-api reads

export type ModelRead = { ok: true; model: string } | { ok: false; message: string };

const INVALID = (detail: string): ModelRead => ({ ok: false, message: `Invalid request: Invalid request: ${detail}` });

/** Go's encoding/json field matching for ASCII names: exact, else ignoring case. */
function sameField(key: string, name: string): boolean {
  return key === name || key.toLowerCase() === name;
}

/** new-api's form-to-struct path: a map (arrays for repeated keys) marshalled with sorted keys, decoded into `{model}`. */
function structModel(pairs: Array<[string, string]>): ModelRead {
  const map = new Map<string, string[]>();
  for (const [k, v] of pairs) map.set(k, [...(map.get(k) ?? []), v]);
  let model = '';
  for (const k of [...map.keys()].sort()) {
    if (!sameField(k, 'model')) continue;
    const values = map.get(k)!;
    if (values.length > 1) return INVALID('json: cannot unmarshal array into Go struct field ModelRequest.model of type string');
    model = values[0]!;
  }
  return { ok: true, model };
}

/** The top-level `model` of a JSON body (the distributor uses gjson: exact key). */
function jsonModel(body: Buffer, exactKey: boolean): ModelRead {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return INVALID('invalid JSON request body');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: true, model: '' };
  let model: unknown;
  for (const [k, value] of Object.entries(v)) if (exactKey ? k === 'model' : sameField(k, 'model')) model = value;
  if (model === undefined || model === null) return { ok: true, model: '' };
  if (typeof model !== 'string') return INVALID('field model must be a string');
  return { ok: true, model };
}

/**
 * The value parts of a multipart body (name, value), as Go's multipart reader finds them for the
 * forms clients send: parts end at CRLF (or LF) `--boundary`, a part with a filename is a file;
 * null when the final boundary is missing.
 */
function multipartValues(body: string, boundary: string): Array<[string, string]> | null {
  const first = body.indexOf(`--${boundary}`);
  if (first === -1) return null;
  const nl = body[first + boundary.length + 2] === '\r' ? '\r\n' : '\n';
  const parts = body.slice(first).split(`${nl}--${boundary}`);
  if (!parts[parts.length - 1]!.startsWith('--')) return null;
  const out: Array<[string, string]> = [];
  for (const raw of parts.slice(0, -1)) {
    const part = raw.startsWith(`--${boundary}`) ? raw.slice(boundary.length + 2) : raw;
    const split = part.indexOf(`${nl}${nl}`);
    if (split === -1) return null;
    const head = part.slice(0, split);
    const disposition = /^content-disposition:\s*form-data\s*;(.*)$/im.exec(head)?.[1] ?? '';
    const name = /(?:^|;)\s*name\s*=\s*(?:"([^"]*)"|([^;\s]+))/i.exec(disposition);
    if (!name || /(?:^|;)\s*filename\s*=\s*"?[^";\s]/i.test(disposition)) continue;
    out.push([Buffer.from(name[1] ?? name[2]!, 'latin1').toString('utf8'), Buffer.from(part.slice(split + nl.length * 2), 'latin1').toString('utf8')]);
  }
  return out;
}

/** getModelFromRequest: by Content-Type, JSON, then a form, then multipart. */
async function modelByContentType(ct: string, body: Buffer): Promise<ModelRead> {
  if (ct.startsWith('application/json')) return jsonModel(body, true);
  if (ct.includes('application/x-www-form-urlencoded')) {
    const q = goParseQuery(body.toString('latin1'));
    if (q.error) return INVALID('invalid form body');
    return structModel(q.pairs);
  }
  if (ct.includes('multipart/form-data')) {
    const boundary = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(ct);
    if (!boundary) return jsonModel(body, false);
    const pairs = multipartValues(body.toString('latin1'), boundary[1] ?? boundary[2]!);
    if (pairs === null) return INVALID('multipart: NextPart: EOF');
    return structModel(pairs);
  }
  return { ok: true, model: '' };
}

/** The relay's answer when the distributor refuses, or the model it read ('' for none it needed). */
export type Distributed = { kind: 'none' } | { kind: 'model'; model: string } | { kind: 'error'; status: number; message: string };

const MODEL_REQUIRED = 'Model name not specified, model name cannot be empty';

/** Whether new-api runs its distributor on this method and decoded path, and so reads a model. */
function distributes(method: string, path: string): boolean {
  const v1Posts = [
    '/v1/messages',
    '/v1/completions',
    '/v1/chat/completions',
    '/v1/responses',
    '/v1/responses/compact',
    '/v1/alpha/search',
    '/v1/edits',
    '/v1/images/generations',
    '/v1/images/edits',
    '/v1/embeddings',
    '/v1/audio/transcriptions',
    '/v1/audio/translations',
    '/v1/audio/speech',
    '/v1/rerank',
    '/v1/moderations',
    '/v1/images/variations',
    '/v1/files',
    '/v1/fine-tunes',
    '/pg/chat/completions',
    '/v1/video/generations',
    '/v1/videos',
    '/kling/v1/videos/text2video',
    '/kling/v1/videos/image2video',
    '/jimeng/',
  ];
  if (method === 'POST') {
    if (v1Posts.includes(path)) return true;
    if (/^\/v1\/engines\/[^/]+\/embeddings$/.test(path)) return true;
    if (path.startsWith('/v1/models/') || path.startsWith('/v1beta/models/')) return true;
    if (/^\/v1\/videos\/[^/]+\/remix$/.test(path)) return true;
    if (/^\/suno\/submit\/[^/]+$/.test(path)) return true;
    if (/^(\/[^/]+)?\/mj\/(submit\/[^/]+|task\/list-by-condition|insight-face\/swap)$/.test(path)) return true;
  }
  if (method === 'GET' && path === '/v1/realtime') return true;
  return false;
}

function mjModel(path: string, action: string): string | null {
  const fixed: Array<[string, string]> = [
    ['/mj/submit/imagine', 'mj_imagine'],
    ['/mj/submit/video', 'mj_video'],
    ['/mj/submit/edits', 'mj_edits'],
    ['/mj/submit/blend', 'mj_blend'],
    ['/mj/submit/describe', 'mj_describe'],
    ['/mj/submit/shorten', 'mj_shorten'],
    ['/mj/submit/modal', 'mj_modal'],
    ['/mj/insight-face/swap', 'swap_face'],
    ['/submit/upload-discord-images', 'mj_upload'],
  ];
  for (const [suffix, model] of fixed) if (path.endsWith(suffix)) return model;
  if (path.endsWith('/mj/submit/change') || path.endsWith('/mj/submit/simple-change')) return `mj_${action.toLowerCase()}`;
  return null;
}

/**
 * What new-api's distributor makes of a request: the model it routes on, or its 400, or nothing
 * (a route that selects no channel, or no distributor at all). Midjourney's action buttons
 * (`/mj/submit/action`) and the Kling and Jimeng adapters' own fields are beyond the stand-in:
 * it reads only what their distributor branch reads.
 */
export async function distribute(method: string, path: string, rawQuery: string, h: IncomingHttpHeaders, body: Buffer): Promise<Distributed> {
  if (!distributes(method, path)) return { kind: 'none' };
  const ct = header(h, 'content-type');
  const err = (message: string): Distributed => ({ kind: 'error', status: 400, message });
  let model = '';
  if (path.includes('/mj/')) {
    if (/\/(fetch|image-seed|list-by-condition|notify)$/.test(path)) return { kind: 'none' };
    let action = '';
    if (ct.startsWith('application/json')) {
      try {
        const v = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
        action = typeof v.action === 'string' ? v.action : '';
      } catch {
        return err('Invalid Midjourney request: invalid character');
      }
    }
    const m = mjModel(path, action);
    if (m === null) return err('Invalid request, unable to parse model');
    return { kind: 'model', model: m };
  }
  if (path.includes('/suno/')) {
    if (method === 'POST' && path.endsWith('/fetch')) return { kind: 'none' };
    const action = /^\/suno\/submit\/([^/]+)$/.exec(path)?.[1] ?? '';
    return { kind: 'model', model: `suno_${action.toLowerCase()}` };
  }
  if (path.includes('/v1/videos/') && path.endsWith('/remix')) return { kind: 'none' };
  const kling = path.startsWith('/kling/');
  if (path === '/jimeng/') {
    const action = ginQuery(rawQuery, 'Action');
    if (action === '') return err('Action query parameter is required');
    if (action === 'CVSync2AsyncGetResult') return { kind: 'none' };
  }
  if (kling || path === '/jimeng/' || path.includes('/v1/videos') || path.includes('/v1/video/generations')) {
    const r = await modelByContentType(ct, body);
    if (!r.ok) return err(r.message);
    model = r.model;
  } else if (path.startsWith('/v1beta/models/') || path.startsWith('/v1/models/')) {
    const rest = path.slice(path.indexOf('/models/') + 8);
    model = rest.split(':')[0]!;
  } else if (!path.startsWith('/v1/audio/transcriptions') && !ct.includes('multipart/form-data')) {
    const r = await modelByContentType(ct, body);
    if (!r.ok) return err(r.message);
    model = r.model;
  }
  if (path === '/v1/realtime') model = ginQuery(rawQuery, 'model');
  if (path.startsWith('/v1/moderations') && model === '') model = 'text-moderation-stable';
  if (path.endsWith('embeddings') && model === '') model = /^\/v1\/engines\/([^/]+)\/embeddings$/.exec(path)?.[1] ?? '';
  if (path.startsWith('/v1/images/generations') && model === '') model = 'dall-e';
  if (path.startsWith('/v1/images/edits')) {
    const t = ct.split(/[ ;]/)[0];
    if (t === 'application/x-www-form-urlencoded' || t === 'multipart/form-data') {
      const r = await modelByContentType(ct, body);
      if (r.ok && r.model !== '') model = r.model;
    }
  }
  if (path.startsWith('/v1/audio/speech') && model === '') model = 'tts-1';
  if (path.startsWith('/v1/audio/translations') || path.startsWith('/v1/audio/transcriptions')) {
    const r = await modelByContentType(ct, body);
    if (r.ok && r.model !== '') model = r.model;
    if (model === '') model = 'whisper-1';
  }
  if (path.startsWith('/pg/chat/completions')) {
    const r = await modelByContentType(ct, body);
    if (!r.ok) return err(r.message);
    model = r.model;
  }
  if (model === '') return err(MODEL_REQUIRED);
  // WithCompactModelSuffix: a compaction routes on the model's compact variant (an id that already
  // ends so is left alone).
  if (path.startsWith('/v1/responses/compact') && !model.endsWith(COMPACT_SUFFIX)) model += COMPACT_SUFFIX;
  return { kind: 'model', model };
}

const COMPACT_SUFFIX = '-openai-compact';

// ---------------------------------------------------------------------------------------------
// Model lists (controller/model.go), keys as Go writes them

/** `created` of every model new-api lists: 1626777600, 2021-07-20T10:40:00Z. */
const CREATED = 1_626_777_600;

export function openAiModel(id: string): Record<string, unknown> {
  return { id, object: 'model', created: CREATED, owned_by: 'custom', supported_endpoint_types: ['openai'] };
}

export function anthropicModel(id: string): Record<string, unknown> {
  return { id, created_at: new Date(CREATED * 1000).toISOString().replace('.000Z', 'Z'), display_name: id, type: 'model' };
}

export function geminiModel(id: string): Record<string, unknown> {
  return {
    name: id,
    baseModelId: null,
    version: null,
    displayName: id,
    description: null,
    inputTokenLimit: null,
    outputTokenLimit: null,
    supportedGenerationMethods: null,
  };
}

/** `GET /v1/models`: Anthropic's list with `x-api-key` and `anthropic-version`; with `x-goog-api-key` or `?key=`, new-api answers a model lookup of "" (200, an error body); else OpenAI's list. */
export function listModels(ids: readonly string[], h: IncomingHttpHeaders, rawQuery: string): Record<string, unknown> {
  if (header(h, 'x-api-key') !== '' && header(h, 'anthropic-version') !== '') {
    return { data: ids.map(anthropicModel), first_id: ids[0] ?? '', has_more: false, last_id: ids[ids.length - 1] ?? '' };
  }
  if (header(h, 'x-goog-api-key') !== '' || ginQuery(rawQuery, 'key') !== '') return modelNotFound('');
  return { data: ids.map(openAiModel), object: 'list', success: true };
}

/** `GET /v1/models/{id}`: Anthropic's shape with `x-api-key` and `anthropic-version`, else OpenAI's. */
export function retrieveModel(ids: readonly string[], id: string, h: IncomingHttpHeaders): Record<string, unknown> {
  if (!ids.includes(id)) return modelNotFound(id);
  return header(h, 'x-api-key') !== '' && header(h, 'anthropic-version') !== '' ? anthropicModel(id) : openAiModel(id);
}

/** `GET /v1beta/models`. */
export function listGeminiModels(ids: readonly string[]): Record<string, unknown> {
  return { models: ids.map(geminiModel), nextPageToken: null };
}

function modelNotFound(id: string): Record<string, unknown> {
  return { error: { message: `The model '${id}' does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } };
}
