/**
 * The models of the relay's task routes, whose names the relay derives itself (new-api
 * service/midjourney.go, service/task.go) or reads through an adapter middleware before its
 * distributor (middleware/kling_adapter.go, jimeng_adapter.go):
 * - Midjourney: `mj_` and the task's action in lower case (`swap_face` for a face swap); the action
 *   comes from the route, or from the body's `action` (change) or `customId` (action buttons);
 * - Suno: `suno_` and the `{action}` of `/suno/submit/{action}` in lower case;
 * - Kling: the adapter reads `model_name`, else `model`, the distributor `model`; Jimeng: the
 *   adapter reads `req_key`, the distributor `model`. Two readings that disagree are refused.
 * A call the relay refuses on its own (an unknown route, a malformed custom id) gives no model.
 */
import { firstQueryValue, matchesFolded, parseQuery, structField, mapField, type Field } from './form.js';
import { bodyKind, modelByContentType, type ModelResult } from './content-type.js';
import { parseMediaType } from './media-type.js';
import { multipartFields } from './multipart.js';
import type { StructureHints } from './prepass.js';
import { decodeGoString, scanStringFields, type FieldMode } from './scan.js';

const NONE: ModelResult = { ok: true, model: null };

/** Go's strings.ToLower, one code point at a time (JavaScript expands U+0130 to two). */
function goLower(s: string): string {
  const lower = s.toLowerCase();
  return lower.length === s.length ? lower : s.replace(/\u0130/g, 'i').toLowerCase();
}

type Values = { ok: true; values: string[] } | { ok: false; reason: string };

/**
 * String fields of a body as the relay's common reader decodes it (by Content-Type, into a struct
 * or a map; see form.ts and scan.ts); "" where absent.
 */
function readFields(ct: string, body: Buffer, names: readonly string[], mode: FieldMode): Values {
  const kind = bodyKind(ct);
  let fields: Field[];
  if (kind === 'json') {
    const scan = scanStringFields(body, names, mode, matchesFolded);
    if (scan.kind === 'invalid') return { ok: false, reason: `request body is not valid JSON (${scan.reason})` };
    return { ok: true, values: scan.kind === 'found' ? scan.values.map((v) => v ?? '') : names.map(() => '') };
  }
  if (kind === 'form') {
    const parsed = parseQuery(body.toString('latin1'));
    if (!parsed.ok) return parsed;
    fields = parsed.fields;
  } else if (kind === 'multipart') {
    const mt = parseMediaType(ct);
    if (mt === null) return { ok: false, reason: 'the Content-Type cannot be parsed as a media type' };
    const boundary = mt.params.get('boundary');
    if (!boundary) return readFields('application/json', body, names, mode);
    // Part names arrive as latin1 strings of UTF-8 bytes; struct fields fold as Go folds the decoded name.
    const wanted = (n: string): boolean => names.some((name) => (mode === 'map' ? n === name : matchesFolded(decodeGoString(Buffer.from(n, 'latin1')), name)));
    const parsed = multipartFields(body, boundary, { wanted });
    if (!parsed.ok) return parsed;
    fields = parsed.fields;
  } else {
    return { ok: true, values: names.map(() => '') };
  }
  const values: string[] = [];
  for (const name of names) {
    if (mode === 'map') {
      values.push(mapField(fields, name));
      continue;
    }
    const f = structField(fields, name);
    if (!f.ok) return f;
    values.push(f.value ?? '');
  }
  return { ok: true, values };
}

/** Midjourney relay modes, by the suffix of the path (new-api relay/constant Path2RelayModeMidjourney), in its order. */
const MJ_MODES: ReadonlyArray<readonly [suffix: string, action: string | null]> = [
  ['/mj/submit/action', 'ACTION'],
  ['/mj/submit/modal', 'MODAL'],
  ['/mj/submit/shorten', 'SHORTEN'],
  ['/mj/insight-face/swap', 'SWAP_FACE'],
  ['/submit/upload-discord-images', 'UPLOAD'],
  ['/mj/submit/imagine', 'IMAGINE'],
  ['/mj/submit/video', 'VIDEO'],
  ['/mj/submit/edits', 'EDITS'],
  ['/mj/submit/blend', 'BLEND'],
  ['/mj/submit/describe', 'DESCRIBE'],
  ['/mj/notify', null],
  ['/mj/submit/change', 'CHANGE'],
  ['/mj/submit/simple-change', 'CHANGE'],
  ['/fetch', null],
  ['/image-seed', null],
  ['/list-by-condition', null],
];

function mjModelName(action: string): string {
  return action === 'SWAP_FACE' ? 'swap_face' : 'mj_' + goLower(action);
}

const GO_INT = /^[+-]?\d{1,18}$/;

/** The action a Midjourney "action" button (its custom id) stands for; null where the relay fails. */
function plusAction(customId: string, bodyAction: string): string | null {
  if (customId === '') return null;
  const splits = customId.split('::');
  if (splits.length < 2) return null; // the relay panics (500)
  if (splits[1] === 'JOB' && splits.length < 3) return null;
  const action = splits[1] === 'JOB' ? splits[2]! : splits[1]!;
  if (action === '') return null;
  const index = (): boolean => splits.length >= 4 && GO_INT.test(splits[3]!);
  if (action.includes('upsample')) return index() ? 'UPSCALE' : null;
  if (action.includes('variation')) {
    if (action === 'variation') return index() ? 'VARIATION' : null;
    if (action === 'low_variation') return 'LOW_VARIATION';
    if (action === 'high_variation') return 'HIGH_VARIATION';
    return bodyAction; // the relay keeps the body's action
  }
  if (action.includes('pan')) return 'PAN';
  if (action.includes('reroll')) return 'REROLL';
  if (action === 'Outpaint') return 'ZOOM';
  if (action === 'CustomZoom') return 'CUSTOM_ZOOM';
  if (action === 'Inpaint') return 'INPAINT';
  return null;
}

/** The model of a Midjourney call (any path the distributor sends to its Midjourney branch). */
export function midjourneyModel(path: string, ct: string, body: Buffer): ModelResult {
  const mode = MJ_MODES.find(([suffix]) => path.endsWith(suffix));
  if (mode === undefined || mode[1] === null) return NONE;
  const action = mode[1];
  if (action !== 'ACTION' && action !== 'CHANGE') return { ok: true, model: mjModelName(action) };
  const read = readFields(ct, body, ['action', 'customId'], 'struct');
  if (!read.ok) return { ok: false, problem: 'invalid', reason: read.reason };
  const [bodyAction, customId] = read.values as [string, string];
  const resolved = action === 'CHANGE' ? bodyAction : plusAction(customId, bodyAction);
  return { ok: true, model: resolved === null ? null : mjModelName(resolved) };
}

const SUNO_SUBMIT = '/suno/submit/';

/** The model of a Suno call: `suno_{action}`; none for its fetches, or off its routes. */
export function sunoModel(method: string, path: string): string | null {
  if (method === 'POST' && path.endsWith('/fetch')) return null;
  if (path.startsWith('/suno/')) {
    const action = path.startsWith(SUNO_SUBMIT) ? path.slice(SUNO_SUBMIT.length) : '';
    return action === '' || action.includes('/') ? null : 'suno_' + goLower(action);
  }
  // A `/v1beta/models/...` path containing `/suno/`: the relay has no `{action}` there.
  return 'suno_';
}

/** A task adapter's reading and the distributor's must agree; either may be empty. */
function agree(adapter: string, ct: string, body: Buffer, hints: StructureHints | undefined): ModelResult {
  const distributor = modelByContentType(ct, body, hints, true);
  if (!distributor.ok) return distributor;
  const d = distributor.model;
  if (adapter !== '' && d !== null && adapter !== d) {
    return { ok: false, problem: 'invalid', reason: `the body names two models ("${adapter}" for the task adapter, "${d}" for routing)` };
  }
  return { ok: true, model: d ?? (adapter || null) };
}

export function klingModel(ct: string, body: Buffer, hints: StructureHints | undefined): ModelResult {
  // The adapter ignores a body it cannot read; the distributor then reads it alone.
  const read = readFields(ct, body, ['model_name', 'model'], 'map');
  const adapter = read.ok ? read.values[0] || read.values[1]! : '';
  return agree(adapter, ct, body, hints);
}

export function jimengModel(ct: string, body: Buffer, hints: StructureHints | undefined, query: string): ModelResult {
  const action = firstQueryValue(query, 'Action');
  // Without an Action the relay answers 400; fetching a result selects no model.
  if (!action || action === 'CVSync2AsyncGetResult') return NONE;
  const read = readFields(ct, body, ['req_key'], 'map');
  if (!read.ok) return NONE; // the relay answers 400 "Invalid request body"
  return agree(read.values[0]!, ct, body, hints);
}
