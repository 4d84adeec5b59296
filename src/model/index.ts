/**
 * Which model a request asks for, read the way the relay will read it: the route (src/routing/routes.ts)
 * says where the relay's distributor looks (body, path, query, a task's action), the Content-Type
 * how it reads a body (content-type.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { BodyBudgetExceededError } from '../http/body-budget.js';
import { planFor, routeOf, wildcardPlan, type ModelPlan, type Route } from '../routing/routes.js';
import { decodeBody, relayCoding, type DecodeBudget, type RelayCoding } from './decode.js';
import { FORM_TYPE, JSON_TYPE, modelByContentType, MULTIPART_TYPE, type ModelResult } from './content-type.js';
import { firstQueryValue } from './form.js';
import { engineModel, geminiPathModel } from './path.js';
import { ModelPrepass, type StructureHints } from './prepass.js';
import { klingModel, jimengModel, midjourneyModel, sunoModel } from './tasks.js';

export type { ModelPrepass };

export type { ModelResult };

const NONE: ModelResult = { ok: true, model: null };

/**
 * Bodies from this size on are read into structure hints while they arrive (prepass.ts); below
 * it, scanning the whole body at the end costs less than feeding each chunk.
 */
const PREPASS_FROM = 256 * 1024;

/**
 * A prepass for this request's body when `requestedModel` will scan it as JSON: a route whose
 * model is read from the body, a JSON Content-Type, sent uncompressed, large or of unknown length.
 * (A compressed body is read into one after decoding, in requestedModel.)
 */
export function modelPrepass(method: string, path: string, headers: IncomingHttpHeaders, route: Route = routeOf(path)): ModelPrepass | null {
  const plan = planFor(route, method);
  if (plan.kind !== 'body') return null;
  const ct = headers['content-type'];
  if (ct === undefined || !ct.startsWith(JSON_TYPE) || relayCoding(method, headers['content-encoding']) !== null) return null;
  const length = headers['content-length'];
  if (length !== undefined && Number(length) < PREPASS_FROM) return null;
  return new ModelPrepass();
}

/**
 * The model a request asks for. A body the relay decodes before reading it (relayCoding: exactly
 * `gzip`, `br` or `zstd`) is decoded for inspection, off the event loop, so that compression cannot skip
 * the free-tier check; any other is read as sent, as the relay reads it.
 */
export async function requestedModel(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  body: Buffer | null,
  maxBytes: number,
  /** From a prepass fed this very body, as sent. */
  hints?: StructureHints | null,
  /** Where the bytes of a decoded body are counted while it is read (the request's BodyLease). */
  budget?: DecodeBudget | null,
  route: Route = routeOf(path),
  /** The query string, without `?` (realtime reads `?model=`, Jimeng `?Action=`). */
  query = '',
): Promise<ModelResult> {
  let plan = planFor(route, method);
  if (plan.kind === 'path') {
    plan = wildcardPlan(path);
    if (plan.kind === 'path') return { ok: true, model: geminiPathModel(path) ?? null };
  }
  switch (plan.kind) {
    case 'none':
      return NONE;
    case 'query':
      return { ok: true, model: firstQueryValue(query, 'model') || null };
    case 'suno':
      return { ok: true, model: sunoModel(method, path) };
    default:
  }
  const ct = headers['content-type'] ?? '';
  // An empty body is read as it is: the relay refuses what it cannot read in it, if anything.
  const coding = relayCoding(method, headers['content-encoding']);
  if (body !== null && body.length > 0 && coding !== null) {
    const p = plan;
    return decodedModel(body, coding, maxBytes, budget ?? null, (b, h) => readPlan(p, ct, b, h, path, query));
  }
  return readPlan(plan, ct, body, hints ?? undefined, path, query);
}

/**
 * A compressed body's model: decoded (at most `maxBytes`, maxDecodedBodyBytes, counted in the
 * budget as it comes out), read, and the decoded copy let go. Past the budget it throws
 * BodyBudgetExceededError (the gateway answers 503).
 */
async function decodedModel(
  body: Buffer,
  coding: RelayCoding,
  maxBytes: number,
  budget: DecodeBudget | null,
  read: (body: Buffer, hints: StructureHints | undefined) => ModelResult,
): Promise<ModelResult> {
  const decoded = await decodeBody(body, coding, maxBytes, budget);
  if (!decoded.ok) {
    if (decoded.problem === 'busy') throw new BodyBudgetExceededError(decoded.reason);
    return { ok: false, problem: decoded.problem, reason: decoded.reason };
  }
  try {
    const hints = decoded.body.length >= PREPASS_FROM ? await prepassInTurns(decoded.body) : undefined;
    return read(decoded.body, hints);
  } finally {
    budget?.give(decoded.held);
  }
}

/** Slices fed to the prepass per turn of the event loop when a whole decoded body is at hand. */
const SLICE = 64 * 1024;

/** Reads a decoded body into a prepass a slice per turn, so other requests run in between. */
async function prepassInTurns(body: Buffer): Promise<ModelPrepass> {
  const prepass = new ModelPrepass();
  for (let at = 0; at < body.length; at += SLICE) {
    prepass.feed(body.subarray(at, at + SLICE));
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return prepass;
}

/** Carries out a plan that reads the body (or a task route's own rules) on the body as it will be read. */
function readPlan(plan: ModelPlan, ct: string, body: Buffer | null, hints: StructureHints | undefined, path: string, query: string): ModelResult {
  switch (plan.kind) {
    case 'body':
      break;
    case 'mj':
      return midjourneyModel(path, ct, body ?? EMPTY);
    case 'kling':
      return klingModel(ct, body ?? EMPTY, hints);
    case 'jimeng':
      return jimengModel(ct, body ?? EMPTY, hints, query);
    default:
      return NONE;
  }
  const b = body ?? EMPTY;
  let model: string | null = null;
  // The common call (a JSON chat body) takes this branch alone.
  if (plan.first && !(ct.length > JSON_TYPE.length && ct.includes(MULTIPART_TYPE))) {
    const r = modelByContentType(ct, b, hints, false);
    if (!r.ok) return r;
    // Nothing more to do for most routes: their answer is this read's.
    if (plan.second === 'none' && (r.model !== null || (plan.fallback === null && !plan.engineParam))) return r;
    model = r.model;
  }
  if (plan.second !== 'none' && (plan.second !== 'lenient-form' || isExactFormType(ct))) {
    const r = modelByContentType(ct, b, hints, true);
    // Where the relay ignores a body it cannot read (the audio uploads, image edits), sluice still
    // refuses it: it cannot tell that the relay did not read a model from it after all.
    if (!r.ok) return r;
    if (plan.second === 'strict' || r.model !== null) model = r.model;
  }
  if (model === null && plan.engineParam) model = engineModel(path) ?? null;
  if (model === null) model = plan.fallback;
  return { ok: true, model };
}

const EMPTY = Buffer.alloc(0);

/** gin's `c.ContentType()`: the value up to the first space or `;`, compared exactly. */
function isExactFormType(ct: string): boolean {
  const end = ct.search(/[ ;]/);
  const t = end === -1 ? ct : ct.slice(0, end);
  return t === FORM_TYPE || t === MULTIPART_TYPE;
}
