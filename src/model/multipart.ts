/**
 * The value fields of a multipart/form-data body, as Go's mime/multipart `Reader.ReadForm` finds
 * them (the relay's multipart reader), so a `model` part cannot hide from sluice:
 * - lines before the first `--boundary` line are skipped; that first line ending in LF alone
 *   switches the whole body to LF line ends;
 * - a part's data ends at `<nl>--boundary` followed by `--`, a space, a tab, CR, LF or the end of
 *   the body (`--boundaryX` is data); after it comes `<nl>`, then the next `--boundary` line or the
 *   final `--boundary--` line, anything else fails the form;
 * - a body that ends before the final boundary fails the form, as do more than 1000 parts;
 * - a part is a value when its Content-Disposition (the first one, read as `mime.ParseMediaType`
 *   reads it) is `form-data` with a non-empty `name` and an empty or absent `filename`.
 * Where sluice would have to follow Go into corners no client uses (a folded header line, a
 * quoted-printable wanted field, a Content-Disposition Go cannot parse that might name a wanted
 * field), the body is refused instead.
 *
 * Field names and values are latin1 strings (one char per byte), as form.ts expects.
 */
import type { Field, Fields } from './form.js';
import { parseMediaType } from './media-type.js';

const LF = 0x0a;
const CR = 0x0d;

/** Go's ReadForm refuses a form with more parts than this. */
const MAX_PARTS = 1000;

function isLwsp(c: number | undefined): boolean {
  return c === 0x20 || c === 0x09;
}

function startsWithAt(buf: Buffer, at: number, prefix: Buffer): boolean {
  return at + prefix.length <= buf.length && buf.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;
}

/** What follows `--boundary` (or `--boundary--`) on a line, after spaces and tabs: the start of that rest, or -1 without the prefix. */
function restAfter(buf: Buffer, start: number, end: number, dash: Buffer, final: boolean): number {
  if (!startsWithAt(buf, start, dash) || start + dash.length > end) return -1;
  let i = start + dash.length;
  if (final) {
    if (i + 2 > end || buf[i] !== 0x2d || buf[i + 1] !== 0x2d) return -1;
    i += 2;
  }
  while (i < end && isLwsp(buf[i])) i++;
  return i;
}

/** Whether buf[from, end) is exactly the line end `nl`. */
function isNl(buf: Buffer, from: number, end: number, nl: 'crlf' | 'lf'): boolean {
  return nl === 'lf' ? end - from === 1 && buf[from] === LF : end - from === 2 && buf[from] === CR && buf[from + 1] === LF;
}

/** Index where the data of a part starting at `from` ends (the `<nl>--boundary` that closes it), or -1. */
function dataEnd(buf: Buffer, from: number, nlDash: Buffer, dash: Buffer): number {
  // An empty part may end right at `--boundary`, without the line end before it.
  if (startsWithAt(buf, from, dash) && closes(buf, from + dash.length)) return from;
  let at = from;
  for (;;) {
    const i = buf.indexOf(nlDash, at);
    if (i === -1) return -1;
    if (closes(buf, i + nlDash.length)) return i;
    at = i + 1;
  }
}

/** What follows a boundary makes it one: `--`, white space, a line end or the end of the body. */
function closes(buf: Buffer, at: number): boolean {
  if (at >= buf.length) return true;
  const c = buf[at]!;
  return c === 0x20 || c === 0x09 || c === CR || c === LF || (c === 0x2d && buf[at + 1] === 0x2d);
}

export interface MultipartOptions {
  /** Only the values of fields whose name this accepts are returned (all are still parsed). */
  wanted(name: string): boolean;
}

/**
 * The value fields of the multipart body, or a failure where the relay's ReadForm fails (it then
 * answers 400) or where sluice cannot be sure to read a wanted field as Go would.
 */
export function multipartFields(body: Buffer, boundary: string, opts: MultipartOptions): Fields {
  const dash = Buffer.from(`--${boundary}`, 'latin1');
  let nl: 'crlf' | 'lf' = 'crlf';
  let pos = 0;
  let parts = 0;
  let expectNewPart = false;
  const fields: Field[] = [];
  const fail = (reason: string): Fields => ({ ok: false, reason: `multipart body: ${reason}` });
  // Go's Reader.NextPart, line by line (a line includes its LF).
  for (;;) {
    const start = pos;
    const lf = body.indexOf(LF, pos);
    const end = lf === -1 ? body.length : lf + 1;
    pos = end;
    const finalRest = restAfter(body, start, end, dash, true);
    if (lf === -1) {
      if (finalRest === end) break; // `--boundary--` ending the body without a line end
      return fail('it ends before its final boundary');
    }
    const rest = restAfter(body, start, end, dash, false);
    if (rest !== -1) {
      // The first boundary line ending in LF alone switches the body to LF line ends.
      if (parts === 0 && end - rest === 1) nl = 'lf';
      if (isNl(body, rest, end, nl)) {
        if (++parts > MAX_PARTS) return fail(`more than ${MAX_PARTS} parts`);
        const part = readPart(body, pos, nl, dash, opts);
        if (!part.ok) return fail(part.reason);
        if (part.field) fields.push(part.field);
        pos = part.next;
        expectNewPart = false;
        continue;
      }
    }
    if (finalRest !== -1 && (finalRest === end || isNl(body, finalRest, end, nl))) break;
    if (expectNewPart) return fail('expected a boundary line after a part');
    if (parts === 0) continue; // the preamble
    if (isNl(body, start, end, nl)) {
      expectNewPart = true;
      continue;
    }
    return fail('unexpected line between parts');
  }
  return { ok: true, fields };
}

type PartResult = { ok: true; field: Field | null; next: number } | { ok: false; reason: string };

/** Reads one part's header block and data starting at `from`; `next` is where its closing `<nl>--boundary` begins. */
function readPart(body: Buffer, from: number, nl: 'crlf' | 'lf', dash: Buffer, opts: MultipartOptions): PartResult {
  // textproto.ReadMIMEHeader: lines up to an empty one; each ends in LF, a CR before it dropped.
  let pos = from;
  let disposition: string | undefined;
  let encoding: string | undefined;
  for (;;) {
    const lf = body.indexOf(LF, pos);
    if (lf === -1) return { ok: false, reason: 'a part header block is not terminated' };
    const end = lf > pos && body[lf - 1] === CR ? lf - 1 : lf;
    const line = body.toString('latin1', pos, end);
    pos = lf + 1;
    if (line === '') break;
    // Go joins a folded line to the header before it; no client folds part headers, so sluice
    // refuses them rather than follow.
    if (isLwsp(line.charCodeAt(0))) return { ok: false, reason: 'folded part header lines are not accepted' };
    const colon = line.indexOf(':');
    if (colon <= 0 || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(line.slice(0, colon))) return { ok: false, reason: 'a part header line is malformed' };
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (name === 'content-disposition') disposition ??= value;
    else if (name === 'content-transfer-encoding') encoding ??= value;
  }
  const nlDash = Buffer.concat([Buffer.from(nl === 'lf' ? '\n' : '\r\n'), dash]);
  const end = dataEnd(body, pos, nlDash, dash);
  if (end === -1) return { ok: false, reason: 'a part is not closed by a boundary' };
  const next = end;
  const mentionsWanted = (): boolean => disposition !== undefined && /name/i.test(disposition) && mightName(disposition, opts);
  if (disposition === undefined) return { ok: true, field: null, next };
  const parsed = parseMediaType(disposition);
  if (parsed === null) {
    // Go reads no name from it and skips the part; sluice refuses when it might have named a wanted field.
    return mentionsWanted() ? { ok: false, reason: 'a part Content-Disposition cannot be parsed' } : { ok: true, field: null, next };
  }
  const name = parsed.params.get('name') ?? '';
  if (parsed.type !== 'form-data' || name === '') return { ok: true, field: null, next };
  if ((parsed.params.get('filename') ?? '') !== '') return { ok: true, field: null, next };
  if (!opts.wanted(name)) return { ok: true, field: [name, ''], next };
  if (encoding !== undefined && encoding.toLowerCase() === 'quoted-printable') return { ok: false, reason: `quoted-printable field "${name}" is not accepted` };
  // A part with no data at all ends where it began (then `next` may precede `pos` by nothing).
  return { ok: true, field: [name, next > pos ? body.toString('latin1', pos, next) : ''], next };
}

/** Whether any parameter value in a Content-Disposition could be a wanted name (a loose, case-insensitive look). */
function mightName(disposition: string, opts: MultipartOptions): boolean {
  for (const m of disposition.matchAll(/=\s*"?([^";]*)/g)) {
    const v = m[1]!.trim();
    if (opts.wanted(v) || opts.wanted(v.toLowerCase())) return true;
  }
  // RFC 2231 values (`name*=utf-8''%6Dodel`) and anything else unusual: refuse rather than guess.
  return /\*\s*=|%[0-9a-f]{2}|\\/i.test(disposition);
}
