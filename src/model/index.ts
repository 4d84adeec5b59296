/**
 * Which model a request asks for, read the way the relay will read it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { BodyBudgetExceededError } from '../errors.js';
import { decodeBody, needsDecoding, type DecodeBudget } from './decode.js';
import { modelFromPath } from './path.js';
import { ModelPrepass, type StructureHints } from './prepass.js';
import { scanModel } from './scan.js';

export type { ModelPrepass };

export type ModelResult =
  | { ok: true; model: string | null }
  | { ok: false; status: 400 | 413 | 415; reason: string };

const NONE: ModelResult = { ok: true, model: null };

/**
 * Bodies from this size on are read into structure hints while they arrive (prepass.ts); below
 * it, scanning the whole body at the end costs less than feeding each chunk.
 */
const PREPASS_FROM = 256 * 1024;

/**
 * A prepass for this request's body when `requestedModel` will scan it as JSON: a POST under
 * /v1/ whose model is not in the path, sent uncompressed, large or of unknown length. (A
 * compressed body is read into one after decoding, in requestedModel.)
 */
export function modelPrepass(method: string, path: string, headers: IncomingHttpHeaders): ModelPrepass | null {
  if (method !== 'POST' || !path.startsWith('/v1/') || needsDecoding(headers['content-encoding'])) return null;
  const length = headers['content-length'];
  if (length !== undefined && Number(length) < PREPASS_FROM) return null;
  if (modelFromPath(path) !== undefined) return null;
  return new ModelPrepass();
}

/**
 * Native generative-content endpoints carry the model in the path; every POST
 * under /v1/ may carry it in its JSON body. A compressed body is decoded for
 * inspection so that compression cannot skip the free-tier check; that happens
 * off the event loop, so only for a compressed body is the answer a promise
 * (`identity` is no compression).
 */
export function requestedModel(
  method: string,
  path: string,
  headers: IncomingHttpHeaders,
  body: Buffer | null,
  maxBytes: number,
  /** From a prepass fed this very body, as sent. */
  hints?: StructureHints | null,
  /** Where the bytes of a decoded body are counted while it is read (the request's BodyLease). */
  budget?: DecodeBudget | null,
): ModelResult | Promise<ModelResult> {
  const fromPath = modelFromPath(path);
  if (fromPath !== undefined) return { ok: true, model: fromPath };
  if (method !== 'POST' || !path.startsWith('/v1/') || body === null || body.length === 0) return NONE;
  if (needsDecoding(headers['content-encoding'])) return decodedModel(body, headers, maxBytes, budget ?? null);
  return modelInBody(body, headers['content-type'], hints ?? undefined);
}

/**
 * A compressed body's model: decoded (at most `maxBytes`, maxDecodedBodyBytes, counted in the
 * budget as it comes out), read, and the decoded copy let go. Past the budget it throws
 * BodyBudgetExceededError (the gateway answers 503).
 */
async function decodedModel(body: Buffer, headers: IncomingHttpHeaders, maxBytes: number, budget: DecodeBudget | null): Promise<ModelResult> {
  const decoded = await decodeBody(body, headers['content-encoding'], maxBytes, budget);
  if (!decoded.ok) {
    if (decoded.status === 503) throw new BodyBudgetExceededError(decoded.reason);
    return { ok: false, status: decoded.status, reason: decoded.reason };
  }
  try {
    const hints = decoded.body.length >= PREPASS_FROM ? await prepassInTurns(decoded.body) : undefined;
    return modelInBody(decoded.body, headers['content-type'], hints);
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

function modelInBody(json: Buffer, contentType: string | undefined, hints: StructureHints | undefined): ModelResult {
  const scan = scanModel(json, hints);
  switch (scan.kind) {
    case 'found':
      return { ok: true, model: scan.model };
    case 'absent':
      return NONE;
    case 'not-object':
      return formModel(contentType, json);
    case 'invalid':
      return { ok: false, status: 400, reason: `request body is not valid JSON (${scan.reason})` };
  }
}

/**
 * The relay also binds form bodies (gin's form binding takes the first value),
 * so a free model must not slip through as a form field.
 */
function formModel(contentType: string | undefined, body: Buffer): ModelResult {
  const ct = (contentType ?? '').toLowerCase();
  if (ct.startsWith('application/x-www-form-urlencoded')) {
    const v = new URLSearchParams(body.toString('latin1')).get('model');
    return { ok: true, model: v === null ? null : Buffer.from(v, 'latin1').toString('utf8') };
  }
  // The boundary is case-sensitive: read it from the header as sent, not lower-cased.
  if (ct.startsWith('multipart/form-data')) return { ok: true, model: multipartField(contentType!, body, 'model') };
  return NONE;
}

/**
 * The first non-file part named `field`, as Go's multipart reader (and so gin) reads it: lines end
 * in CRLF, or in LF alone when the first boundary line does.
 */
function multipartField(contentType: string, body: Buffer, field: string): string | null {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) return null;
  const delim = Buffer.from(`--${boundary}`);
  let pos = body.indexOf(delim);
  if (pos === -1) return null;
  const nl = body[pos + delim.length] === 0x0d ? '\r\n' : '\n';
  const blank = nl + nl;
  const next = Buffer.from(nl + `--${boundary}`);
  while (pos !== -1) {
    const headStart = pos + delim.length + nl.length;
    const headEnd = body.indexOf(blank, headStart);
    if (headEnd === -1) return null;
    const head = body.toString('latin1', headStart, headEnd);
    const valueStart = headEnd + blank.length;
    const end = body.indexOf(next, valueStart);
    const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(head)?.[1];
    if (name === field && !/filename=/i.test(head)) return body.toString('utf8', valueStart, end === -1 ? body.length : end);
    pos = end === -1 ? -1 : end + nl.length;
  }
  return null;
}
