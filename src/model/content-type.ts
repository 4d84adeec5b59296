/**
 * How the relay reads a body for its model, by Content-Type (new-api common/gin.go and
 * middleware/distributor.go), never by what the body looks like:
 * - a Content-Type starting with `application/json` (exactly so: the comparison is
 *   case-sensitive) is read as JSON;
 * - else one containing `application/x-www-form-urlencoded` anywhere is read as a form, with Go's
 *   url.ParseQuery;
 * - else one containing `multipart/form-data` is read as a multipart form, where the route reads
 *   multipart at all; without a boundary parameter the body is read as JSON after all;
 * - anything else gives no model.
 * What the relay could read two ways is refused with 400 instead of guessed: a Content-Type that
 * names a form or JSON only in another letter case, a form body that is also a JSON object naming
 * a model, a repeated or case-folded `model` field, a multipart body sluice cannot follow Go
 * through.
 */
import type { BodyProblem } from './decode.js';
import { matchesFolded, parseQuery, structField } from './form.js';
import { parseMediaType } from './media-type.js';
import { multipartFields } from './multipart.js';
import type { StructureHints } from './prepass.js';
import { scanModel } from './scan.js';

export type ModelResult = { ok: true; model: string | null } | { ok: false; problem: BodyProblem; reason: string };

const NONE: ModelResult = { ok: true, model: null };

export const JSON_TYPE = 'application/json';
export const FORM_TYPE = 'application/x-www-form-urlencoded';
export const MULTIPART_TYPE = 'multipart/form-data';

function refuse(reason: string): ModelResult {
  return { ok: false, problem: 'invalid', reason };
}

/** What a Content-Type makes the relay's body reader do (common/gin.go), compared as the relay compares it. */
export type BodyKind = 'json' | 'form' | 'multipart' | 'none';

export function bodyKind(ct: string): BodyKind {
  if (ct.startsWith(JSON_TYPE)) return 'json';
  if (ct.includes(FORM_TYPE)) return 'form';
  if (ct.includes(MULTIPART_TYPE)) return 'multipart';
  return 'none';
}

/**
 * The model the relay's `getModelFromRequest` reads: by Content-Type, multipart only where
 * `multipart` says the route reads it. Empty is no model.
 */
export function modelByContentType(ct: string, body: Buffer, hints: StructureHints | undefined, multipart: boolean): ModelResult {
  const kind = bodyKind(ct);
  if (kind === 'json') return jsonModel(body, hints);
  // Only in another letter case (`Application/JSON`) the relay reads no model where other readers would.
  const folded = bodyKind(ct.toLowerCase());
  if (folded !== kind)
    return refuse(`Content-Type "${ct}" names ${folded === 'json' ? 'JSON' : `a ${folded} form`} only in other letter case, which the relay does not read as one`);
  if (kind === 'form') return formModel(body, hints);
  if (kind === 'multipart' && multipart) return multipartModel(ct, body, hints);
  return NONE;
}

/** JSON, as the relay reads it (top-level `model`; see scan.ts for the rules). */
function jsonModel(body: Buffer, hints: StructureHints | undefined): ModelResult {
  const scan = scanModel(body, hints);
  switch (scan.kind) {
    case 'found':
      return { ok: true, model: scan.model || null };
    case 'absent':
    case 'not-object':
      return NONE;
    case 'invalid':
      return refuse(`request body is not valid JSON (${scan.reason})`);
    case 'unread':
      return refuse(scan.reason);
  }
}

const isModelField = (name: string): boolean => name.length === 5 && matchesFolded(name, 'model');

/** A urlencoded form, read with Go's url.ParseQuery into new-api's model struct. */
function formModel(body: Buffer, hints: StructureHints | undefined): ModelResult {
  // A form body that is also a JSON object naming a model reads two ways: the relay reads the
  // form, anything that sniffs the body the JSON (`{"a":"&model=x&","model":"y"}`).
  const json = scanModel(body, hints);
  if (json.kind === 'found') return refuse('the body is declared a form but is a JSON object with a model field');
  const parsed = parseQuery(body.toString('latin1'));
  if (!parsed.ok) return refuse(parsed.reason);
  const m = structField(parsed.fields, 'model');
  return m.ok ? { ok: true, model: m.value || null } : refuse(m.reason);
}

/** A multipart form, as Go's multipart reader and new-api's model struct read it. */
function multipartModel(ct: string, body: Buffer, hints: StructureHints | undefined): ModelResult {
  // Node hands header values over as latin1 strings, one char per byte, as media-type.ts expects.
  const mt = parseMediaType(ct);
  if (mt === null) return refuse(`Content-Type "${ct}" cannot be parsed as a media type`);
  const boundary = mt.params.get('boundary');
  // new-api reads a multipart Content-Type without a boundary as JSON (encoding/json).
  if (boundary === undefined || boundary === '') return jsonModel(body, hints);
  const parsed = multipartFields(body, boundary, { wanted: isModelField });
  if (!parsed.ok) return refuse(parsed.reason);
  const m = structField(parsed.fields, 'model');
  return m.ok ? { ok: true, model: m.value || null } : refuse(m.reason);
}
