/**
 * A stand-in for the AI-model relay (new-api) that sluice sits in front of.
 *
 * It answers the routes sluice forwards with bodies realistic enough for the official OpenAI,
 * Anthropic and Google GenAI SDKs to parse, records every request it gets, and can be told to
 * misbehave (force a status, delay, stream slowly, die mid-stream, echo bytes). It uses Node's
 * built-ins and `ws` (for new-api's Realtime WebSocket route), no SDK, so the demo and the
 * benchmarks run it with the dev dependencies alone.
 *
 * It does not authenticate: the sidecar does. It records the headers it got, the key new-api's
 * token check would read from them, and the model new-api's distributor would read, and answers as
 * new-api does where a client could tell (new-api.ts): the distributor's 400s, CORS preflights and
 * headers, the model-list shapes chosen by headers, the 404 of an unknown `/v1` or `/api` path.
 */
import { randomBytes } from 'node:crypto';
import { createServer, ServerResponse as NodeServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import * as zlib from 'node:zlib';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import {
  CORS_NORMAL_HEADERS,
  CORS_PREFLIGHT_HEADERS,
  distribute,
  isCorsRequest,
  listGeminiModels,
  listModels,
  retrieveModel,
  routeHasCors,
  routingPath,
  runsTokenAuth,
  tokenAuthKey,
  tokenKeyParts,
  CHANNEL_FORBIDDEN,
  type Distributed,
} from './new-api.js';

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Set true if the client connection closed before the response finished (not when the
   * stand-in itself kills the connection because of `dieAfterEvents`). */
  closedEarly: boolean;
  /** The model new-api's distributor read (undefined where it reads none: no such route, or a
   * route that selects no channel); what sluice counted must equal it. */
  model: string | undefined;
  /** The distributor's refusal (status 400) where it could not read a model. */
  modelError: string | undefined;
  /** The token new-api's TokenAuth would validate ('' for none), from whichever header it reads. */
  key: string;
  /** The part of it the relay looks up (no `sk-`, nothing from the first `-` on), and the channel a `-<n>` asks for. */
  tokenKey: string;
  channel: string | null;
}

export interface RelayBehaviour {
  /** Force this status. Without `body`/`echo`: a 2xx/3xx status keeps the default answer (with
   * this status); a status >= 400 answers with an EMPTY body (like new-api's own 429). */
  status?: number;
  /** Wait this long before answering (the wait ends early if the client leaves). */
  delayMs?: number;
  /** Gap between SSE events (default 0; a 0 gap still yields to the event loop between events). */
  sseIntervalMs?: number;
  /** How many text-delta events a stream sends (default 3). */
  sseEvents?: number;
  /** Destroy the socket after this many stream events have been written and flushed (every
   * event counts, not only text deltas; `data: [DONE]` too). 0: destroy without answering at
   * all. On a non-stream JSON answer: send the headers and half the body, then destroy. */
  dieAfterEvents?: number;
  /** Reply (200 unless `status`) with the exact request body bytes and the request content-type. */
  echo?: boolean;
  /** Reply with exactly these bytes (200 unless `status`). Content-type: `application/json` when
   * the bytes look like JSON, else `application/octet-stream`, unless `headers` sets it. */
  body?: Buffer | string;
  /** Extra response headers (they override the defaults of the same name). */
  headers?: Record<string, string | string[]>;
  /** Name of a response header set to this process's monotonic clock (`process.hrtime.bigint()`,
   * ns) as the answer is written, so a benchmark on the same machine can time the way back alone:
   * CLOCK_MONOTONIC is one clock for every process on a host. */
  stampHeader?: string;
}

export interface RelayStandin {
  url: string;
  port: number;
  /** WebSocket sessions open now (`GET /v1/realtime`). */
  readonly webSockets: number;
  /** Every request received, in order (recorded once its body is fully read). */
  requests: RecordedRequest[];
  /** Requests whose headers arrived, complete or not: what "nothing was forwarded" is checked on. */
  readonly started: number;
  /** Later calls take precedence. */
  behave(match: (req: RecordedRequest) => boolean, b: RelayBehaviour): void;
  /** Clear requests and behaviours. */
  reset(): void;
  /** Resolve once `pred(requests)` is true; reject after `timeoutMs` (default 5000). */
  waitFor(pred: (r: RecordedRequest[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export interface RelayStandinOptions {
  port?: number;
  host?: string;
  /** No log lines on stdout. */
  quiet?: boolean;
  /** Keep only the newest N recorded requests (default: unlimited). Benchmarks should set this. */
  maxRecorded?: number;
  /**
   * Keys (as the relay looks them up: no `sk-`) of administrators, whose `sk-<key>-<n>` asks for
   * channel n; any other key with a channel gets new-api's 403 where TokenAuth runs (default: none).
   */
  adminKeys?: readonly string[];
  /**
   * Check keys as new-api's TokenAuth does: on the routes it guards, a call whose token (the key
   * `key` records, one leading `sk-` and any `-<channel>` removed, as the relay looks it up) this
   * does not accept gets new-api's 401. Unset: every key is accepted (sluice has judged it).
   */
  tokens?: (token: string) => boolean | Promise<boolean>;
}

/** The text every default answer carries; a stream's deltas concatenate to exactly this. */
export const STANDIN_TEXT = 'Hello from the relay stand-in.';

/** Models listed by `GET /v1/models` (and `GET /v1beta/models`). */
export const STANDIN_MODELS: readonly string[] = ['gpt-4o-mini', 'claude-haiku-4-5', 'gemini-2.5-flash', 'vend-flash', 'vend-flash-free'];

const DEFAULT_SSE_EVENTS = 3;
/** The header new-api sets on its 403 to a channel a user's token asked for (middleware/auth.go). */
const SPECIFIC_CHANNEL_VERSION = '701e3ae1dc3f7975556d354e0675168d004891c8';
const COMPLETION_TOKENS = 8;
const JSON_TYPE = 'application/json; charset=utf-8';

/** `STANDIN_TEXT` split into `n` consecutive pieces (some empty when n exceeds its length). */
export function standinDeltas(n: number): string[] {
  const count = Math.max(1, Math.floor(n));
  const chars = Array.from(STANDIN_TEXT);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const from = Math.floor((i * chars.length) / count);
    const to = Math.floor(((i + 1) * chars.length) / count);
    out.push(chars.slice(from, to).join(''));
  }
  return out;
}

type Answer =
  | { kind: 'json'; status: number; body: unknown }
  | { kind: 'raw'; status: number; body: Buffer; contentType: string | undefined; headers?: Readonly<Record<string, string>> }
  | { kind: 'stream'; contentType: string; frames: string[] };

interface Exchange {
  rec: RecordedRequest;
  req: IncomingMessage;
  res: ServerResponse;
  b: RelayBehaviour;
  /** The decoded path gin routes on, and the raw query. */
  path: string;
  query: string;
  dist: Distributed;
  /** The body as new-api's handlers read it: undone `Content-Encoding: gzip` or `br`. */
  decoded: Buffer;
  /** The CORS middleware's headers on the answer: a preflight's, an ordinary cross-origin call's, or none. */
  corsHeaders: Readonly<Record<string, string>> | null;
  /** new-api's request id: in the X-Oneapi-Request-Id header and its error messages. */
  requestId: string;
  /** The stand-in destroyed the socket on purpose (dieAfterEvents). */
  killed: boolean;
  /** The response closed (finished or not). */
  closed: boolean;
}

export async function startRelayStandin(opts: RelayStandinOptions = {}): Promise<RelayStandin> {
  const host = opts.host ?? '127.0.0.1';
  const quiet = opts.quiet ?? false;
  const maxRecorded = opts.maxRecorded ?? Infinity;
  const adminKeys = new Set(opts.adminKeys ?? []);

  const requests: RecordedRequest[] = [];
  let started = 0;
  let behaviours: { match: (req: RecordedRequest) => boolean; b: RelayBehaviour }[] = [];
  const sockets = new Set<Socket>();
  const watchers = new Set<() => void>();

  const notify = (): void => {
    for (const w of [...watchers]) w();
  };

  const log = (line: string): void => {
    if (!quiet) process.stdout.write(`[relay] ${line}\n`);
  };

  const pickBehaviour = (rec: RecordedRequest): RelayBehaviour => {
    for (let i = behaviours.length - 1; i >= 0; i--) {
      const entry = behaviours[i];
      if (entry?.match(rec)) return entry.b;
    }
    return {};
  };

  // new-api's one WebSocket route; any other Upgrade is an ordinary request to Go's server.
  const server = createServer(
    { shouldUpgradeCallback: (req: IncomingMessage) => routingPath(pathOf(req.url ?? '/')) === '/v1/realtime' } as Parameters<typeof createServer>[0],
    (req, res) => {
      started++;
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('error', () => {
        /* client went away while sending: nothing is recorded */
      });
      req.on('end', () => {
        const url = req.url ?? '/';
        const q = url.indexOf('?');
        const path = routingPath(q === -1 ? url : url.slice(0, q));
        const query = q === -1 ? '' : url.slice(q + 1);
        const method = req.method ?? 'GET';
        const body = chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks);
        // Go's Header.Get: the first Content-Encoding line alone. (Through sluice there is one line:
        // http-proxy forwards Node's joined value.)
        const decoded = decompressed(method, req.headersDistinct['content-encoding']?.[0], body);
        const dist: Promise<Distributed> = decoded === null ? Promise.resolve({ kind: 'error', status: 400, message: '' }) : distribute(method, path, query, req.headers, decoded);
        void dist.then((d) => record(req, res, { method, url, path, query, body, decoded: decoded ?? body, dist: d }));
      });
    },
  );

  // An upgrade: new-api's middleware (TokenAuth, the distributor) runs first, then its handler
  // switches (gorilla's Upgrader, subprotocol `realtime`). Answers before the switch go out on a
  // response made on the socket.
  const webSockets = new WebSocketServer({ noServer: true, handleProtocols: (offered) => (offered.has('realtime') ? 'realtime' : false) });
  const sessions = new Set<WebSocket>();
  // Node's server takes shouldUpgradeCallback from 24.9; on an older Node, nothing is upgraded.
  const upgrades = (server as { shouldUpgradeCallback?: unknown }).shouldUpgradeCallback !== undefined;
  if (upgrades)
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      started++;
      socket.on('error', () => {
        /* the client left: its close follows */
      });
      const res = new NodeServerResponse(req);
      res.shouldKeepAlive = false;
      res.assignSocket(socket as Socket);
      res.on('finish', () => socket.end());
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = routingPath(q === -1 ? url : url.slice(0, q));
      const query = q === -1 ? '' : url.slice(q + 1);
      void distribute('GET', path, query, req.headers, Buffer.alloc(0)).then((dist) =>
        record(req, res, { method: 'GET', url, path, query, body: Buffer.alloc(0), decoded: Buffer.alloc(0), dist }, { socket, head }),
      );
    });

  /** The realtime session: `session.created` first; `session.update` answered, `standin.close` closes (1000), anything else echoed. */
  const realtime = (ex: Exchange, ws: WebSocket): void => {
    sessions.add(ws);
    ws.on('close', () => sessions.delete(ws));
    ws.on('error', () => {
      /* the client left */
    });
    const model = ex.dist.kind === 'model' ? ex.dist.model : '';
    const session = { id: newId('sess_'), object: 'realtime.session', model, modalities: ['text'] };
    ws.send(JSON.stringify({ type: 'session.created', event_id: newId('event_'), session }));
    ws.on('message', (data: RawData, binary: boolean) => {
      if (binary) return ws.send(data, { binary: true });
      const text = data.toString();
      let event: { type?: unknown; session?: unknown } = {};
      try {
        event = JSON.parse(text) as typeof event;
      } catch {
        // Echoed as it came.
      }
      if (event.type === 'standin.close') return ws.close(1000, 'done');
      if (event.type === 'session.update')
        return ws.send(JSON.stringify({ type: 'session.updated', event_id: newId('event_'), session: { ...session, ...(event.session as object) } }));
      ws.send(JSON.stringify({ type: 'standin.echo', event_id: newId('event_'), received: text }));
    });
  };

  const record = (
    req: IncomingMessage,
    res: ServerResponse,
    r: { method: string; url: string; path: string; query: string; body: Buffer; decoded: Buffer; dist: Distributed },
    upgrade?: { socket: Duplex; head: Buffer },
  ): void => {
    {
      const rec: RecordedRequest = {
        method: r.method,
        url: r.url,
        headers: req.headers,
        body: r.body,
        closedEarly: false,
        model: r.dist.kind === 'model' ? r.dist.model : undefined,
        modelError: r.dist.kind === 'error' ? r.dist.message : undefined,
        key: '',
        tokenKey: '',
        channel: null,
      };
      rec.key = tokenAuthKey(r.path, r.query, req.headers);
      ({ key: rec.tokenKey, channel: rec.channel } = tokenKeyParts(rec.key));
      requests.push(rec);
      if (requests.length > maxRecorded) requests.splice(0, requests.length - maxRecorded);
      // The CORS middleware answers every cross-origin OPTIONS (new-api routes no OPTIONS): its 404 chain runs it too.
      const crossOrigin = isCorsRequest(req.headers);
      const corsHeaders = !crossOrigin ? null : r.method === 'OPTIONS' ? CORS_PREFLIGHT_HEADERS : routeHasCors(r.path) ? CORS_NORMAL_HEADERS : null;
      const ex: Exchange = {
        rec,
        req,
        res,
        b: pickBehaviour(rec),
        killed: false,
        closed: false,
        path: r.path,
        query: r.query,
        dist: r.dist,
        decoded: r.decoded,
        corsHeaders,
        requestId: requestId(),
      };
      res.on('error', () => {
        /* write after the client left: ignored, `closed` stops further writes */
      });
      res.on('close', () => {
        ex.closed = true;
        if (!res.writableFinished && !ex.killed) {
          rec.closedEarly = true;
          notify();
        }
      });
      notify();
      const answered = upgrade === undefined ? answer(ex) : answerUpgrade(ex, upgrade);
      answered.catch((err: unknown) => {
        log(`error answering ${rec.method} ${rec.url}: ${String(err)}`);
        if (!res.headersSent && !ex.closed) sendJson(ex, 500, openAiError('stand-in failure', 'server_error'));
        else req.socket.destroy();
      });
    }
  };
  // Idle keep-alive connections live 60 s, longer than a sidecar agent keeps them.
  server.keepAliveTimeout = 60_000;
  server.headersTimeout = 61_000;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  /** What new-api's middleware refuses before any handler runs (a forced status stands in for any other refusal): true when it answered. */
  const refusedByMiddleware = async (ex: Exchange): Promise<boolean> => {
    const { b, rec } = ex;
    if (b.status !== undefined && b.status >= 400 && b.body === undefined) {
      sendRaw(ex, b.status, Buffer.alloc(0), undefined);
      return true;
    }
    if (opts.tokens !== undefined && rec.method !== 'OPTIONS' && guardedByTokenAuth(ex.path) && !(await opts.tokens(rec.tokenKey))) {
      sendJson(ex, 401, { error: { code: '', message: `无效的令牌 (request id: ${ex.requestId})`, type: 'new_api_error' } });
      return true;
    }
    // TokenAuth refuses a channel asked for by a token not an administrator's, before the distributor reads anything.
    if (rec.channel !== null && rec.method !== 'OPTIONS' && runsTokenAuth(ex.path) && !adminKeys.has(rec.tokenKey)) {
      ex.res.setHeader('specific_channel_version', SPECIFIC_CHANNEL_VERSION);
      sendJson(ex, 403, newApiErrorBody(ex, CHANNEL_FORBIDDEN));
      return true;
    }
    return false;
  };

  const answerUpgrade = async (ex: Exchange, upgrade: { socket: Duplex; head: Buffer }): Promise<void> => {
    if (ex.b.delayMs !== undefined && ex.b.delayMs > 0) await sleepUnlessClosed(ex, ex.b.delayMs);
    if (ex.closed) return;
    log(`upgrade ${ex.rec.url}`);
    // Told to answer with these bytes: an answer instead of the switch.
    if (ex.b.body !== undefined) return sendBody(ex, ex.b.body);
    if (await refusedByMiddleware(ex)) return;
    if (ex.dist.kind === 'error') {
      sendJson(ex, ex.dist.status, newApiErrorBody(ex, ex.dist.message));
      return;
    }
    ex.res.detachSocket(upgrade.socket as Socket);
    webSockets.handleUpgrade(ex.req, upgrade.socket, upgrade.head, (ws) => realtime(ex, ws));
  };

  const answer = async (ex: Exchange): Promise<void> => {
    const { b, rec } = ex;
    if (b.delayMs !== undefined && b.delayMs > 0) {
      await sleepUnlessClosed(ex, b.delayMs);
    }
    if (ex.closed) return;
    log(`${rec.method} ${rec.url} (${rec.body.length} bytes)`);

    if (b.dieAfterEvents === 0) {
      kill(ex);
      return;
    }
    if (b.echo) {
      const ct = rec.headers['content-type'];
      sendRaw(ex, b.status ?? 200, rec.body, ct ?? 'application/octet-stream');
      return;
    }
    if (b.body !== undefined) return sendBody(ex, b.body);
    if (await refusedByMiddleware(ex)) return;
    const ans = defaultAnswer(ex, b.sseEvents ?? DEFAULT_SSE_EVENTS);
    if (ans.kind === 'json') {
      sendJson(ex, b.status ?? ans.status, ans.body);
      return;
    }
    if (ans.kind === 'raw') {
      for (const [name, value] of Object.entries(ans.headers ?? {})) ex.res.setHeader(name, value);
      sendRaw(ex, b.status ?? ans.status, ans.body, ans.contentType);
      return;
    }
    await sendStream(ex, b.status ?? 200, ans.contentType, ans.frames);
  };

  const standin: RelayStandin = {
    url: '',
    port: 0,
    requests,
    get started() {
      return started;
    },
    get webSockets() {
      return sessions.size;
    },
    behave(match, b) {
      behaviours.push({ match, b });
    },
    reset() {
      requests.length = 0;
      started = 0;
      behaviours = [];
    },
    waitFor(pred, timeoutMs = 5_000) {
      return new Promise<void>((resolve, reject) => {
        if (pred(requests)) {
          resolve();
          return;
        }
        const check = (): void => {
          if (!pred(requests)) return;
          done();
          resolve();
        };
        const poll = setInterval(check, 10);
        const timer = setTimeout(() => {
          done();
          reject(new Error(`relay stand-in: waitFor timed out after ${timeoutMs} ms (${requests.length} requests recorded)`));
        }, timeoutMs);
        const done = (): void => {
          clearInterval(poll);
          clearTimeout(timer);
          watchers.delete(check);
        };
        watchers.add(check);
      });
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const ws of sessions) ws.terminate();
        for (const s of sockets) s.destroy();
        server.closeAllConnections();
      });
    },
  };

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('relay stand-in: no TCP address');
  standin.port = addr.port;
  standin.url = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
  log(`listening on ${standin.url}`);
  return standin;
}

/** The path of a request target, without its query. */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Node's zstd decoder where it has one (Node 22.15 and later), which Node 20's types do not describe. */
const zstdDecompressSync = (zlib as unknown as { zstdDecompressSync?: (b: Buffer) => Buffer }).zstdDecompressSync;

/**
 * new-api's DecompressRequestMiddleware: a body sent with exactly `Content-Encoding: gzip`, `br`
 * or `zstd` (a single coding, compared as written) is undone before anything reads it; any other
 * coding is left as it is (zstd too on Node 20, which has no zstd). Null where it cannot be undone
 * (new-api: 400).
 */
function decompressed(method: string, encoding: string | undefined, body: Buffer): Buffer | null {
  if (method === 'GET' || body.length === 0) return body;
  try {
    if (encoding === 'gzip') return gunzipSync(body);
    if (encoding === 'br') return brotliDecompressSync(body);
    if (encoding === 'zstd' && zstdDecompressSync !== undefined) return zstdDecompressSync(body);
  } catch {
    return null;
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// Sending

function requestId(): string {
  // new-api: a time string followed by random characters.
  const d = new Date();
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  const time = `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}${p(d.getMilliseconds(), 3)}`;
  return `${time}${randomBytes(6).toString('hex')}`;
}

function baseHeaders(ex: Exchange, contentType: string | undefined): OutgoingHttpHeaders {
  const h: OutgoingHttpHeaders = { 'x-oneapi-request-id': ex.requestId };
  if (ex.corsHeaders !== null) Object.assign(h, ex.corsHeaders);
  if (contentType !== undefined) h['content-type'] = contentType;
  const extra = ex.b.headers ?? {};
  for (const [k, v] of Object.entries(extra)) h[k.toLowerCase()] = v;
  if (ex.b.stampHeader !== undefined) h[ex.b.stampHeader.toLowerCase()] = String(process.hrtime.bigint());
  return h;
}

function sendRaw(ex: Exchange, status: number, body: Buffer, contentType: string | undefined): void {
  if (ex.closed) return;
  const headers = baseHeaders(ex, contentType);
  // Go's server sends no Content-Length with a 204 (the CORS preflight answer).
  if (status !== 204) headers['content-length'] = body.length;
  ex.res.writeHead(status, headers);
  if (ex.b.dieAfterEvents !== undefined && ex.b.dieAfterEvents > 0 && body.length > 0) {
    ex.res.write(body.subarray(0, Math.floor(body.length / 2)), () => kill(ex));
    return;
  }
  ex.res.end(body);
}

/** The behaviour's `body`, with its status (200 unless told), typed JSON when it looks like JSON. */
function sendBody(ex: Exchange, body: Buffer | string): void {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  sendRaw(ex, ex.b.status ?? 200, bytes, looksLikeJson(bytes) ? JSON_TYPE : 'application/octet-stream');
}

function sendJson(ex: Exchange, status: number, value: unknown): void {
  sendRaw(ex, status, Buffer.from(JSON.stringify(value), 'utf8'), JSON_TYPE);
}

async function sendStream(ex: Exchange, status: number, contentType: string, frames: string[]): Promise<void> {
  const { res, b } = ex;
  if (ex.closed) return;
  const headers = baseHeaders(ex, contentType);
  if (headers['cache-control'] === undefined) headers['cache-control'] = 'no-cache';
  res.writeHead(status, headers);
  res.flushHeaders();
  const interval = b.sseIntervalMs ?? 0;
  let sent = 0;
  for (const frame of frames) {
    if (sent > 0) {
      if (interval > 0) await sleepUnlessClosed(ex, interval);
      else await new Promise<void>((r) => setImmediate(r));
    }
    if (ex.closed) return;
    const flushed = writeFlushed(ex, frame);
    sent++;
    if (b.dieAfterEvents !== undefined && sent >= b.dieAfterEvents) {
      await flushed;
      kill(ex);
      return;
    }
    if (res.writableNeedDrain) await drainOrClose(ex);
  }
  if (!ex.closed) res.end();
}

function writeFlushed(ex: Exchange, chunk: string): Promise<void> {
  return new Promise<void>((resolve) => {
    ex.res.write(chunk, () => resolve());
    if (ex.closed) resolve();
  });
}

function drainOrClose(ex: Exchange): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      ex.res.off('drain', done);
      ex.res.off('close', done);
      resolve();
    };
    ex.res.on('drain', done);
    ex.res.on('close', done);
  });
}

function sleepUnlessClosed(ex: Exchange, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      ex.res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    ex.res.on('close', done);
  });
}

function kill(ex: Exchange): void {
  ex.killed = true;
  ex.req.socket.destroy();
}

function looksLikeJson(bytes: Buffer): boolean {
  for (const c of bytes) {
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    return c === 0x7b || c === 0x5b; // { or [
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Default answers

function openAiError(message: string, type: string, code: string | null = null): unknown {
  return { error: { message, type, param: null, code } };
}

function newId(prefix: string, bytes = 12): string {
  return `${prefix}${randomBytes(bytes).toString('hex')}`;
}

function sse(data: unknown, event?: string): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return event === undefined ? `data: ${payload}\n\n` : `event: ${event}\ndata: ${payload}\n\n`;
}

function parseBody(body: Buffer): Record<string, unknown> {
  if (!looksLikeJson(body)) return {};
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function stringField(o: Record<string, unknown>, key: string, fallback: string): string {
  const v = o[key];
  return typeof v === 'string' && v !== '' ? v : fallback;
}

const GEMINI_PATH = /^\/(v1beta|v1)\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
const MODEL_PATH = /^\/v1\/models\/([^/]+)$/;
const NOT_IMPLEMENTED = new Set(['/v1/images/variations', '/v1/files', '/v1/fine-tunes']);

/** The routes behind new-api's TokenAuth: the relay's own, and the two usage queries of the dashboard API. */
function guardedByTokenAuth(path: string): boolean {
  return !path.startsWith('/api/') || path === '/api/usage/token/' || path === '/api/log/token';
}

/** new-api's answer for a request its middleware refuses: `{"error":{"code","message","type"}}`, keys sorted. */
function newApiError(ex: Exchange, status: number, message: string): Answer {
  return { kind: 'json', status, body: newApiErrorBody(ex, message) };
}

function newApiErrorBody(ex: Exchange, message: string): unknown {
  return { error: { code: '', message: `${message} (request id: ${ex.requestId})`, type: 'new_api_error' } };
}

function defaultAnswer(ex: Exchange, n: number): Answer {
  const { rec, path, query: rawQuery } = ex;
  const query = new URLSearchParams(rawQuery);
  const method = rec.method.toUpperCase();
  const promptTokens = Math.max(1, Math.ceil(ex.decoded.length / 4));

  // The CORS middleware answers a cross-origin OPTIONS itself (new-api routes no OPTIONS at all).
  if (method === 'OPTIONS') {
    if (isCorsRequest(rec.headers)) return { kind: 'raw', status: 204, body: Buffer.alloc(0), contentType: undefined };
    return noRoute(rec, method, path);
  }
  if (ex.dist.kind === 'error') {
    // A body its decompression middleware cannot undo: a bare 400.
    if (ex.dist.message === '') return { kind: 'raw', status: 400, body: Buffer.alloc(0), contentType: undefined };
    return newApiError(ex, ex.dist.status, ex.dist.message);
  }
  const model = ex.dist.kind === 'model' ? ex.dist.model : undefined;

  if (method === 'POST') {
    if (path === '/v1/chat/completions' || path === '/pg/chat/completions') return chatCompletion(parseBody(ex.decoded), promptTokens, n);
    if (path === '/v1/responses') return responsesAnswer(parseBody(ex.decoded), promptTokens, n);
    if (path === '/v1/messages') return anthropicMessage(parseBody(ex.decoded), promptTokens, n);
    const g = GEMINI_PATH.exec(path);
    if (g) return geminiAnswer(g[2] ?? 'gemini', g[3] === 'streamGenerateContent', query.get('alt') === 'sse', promptTokens, n);
    if (NOT_IMPLEMENTED.has(path)) {
      return { kind: 'json', status: 501, body: { error: { message: 'API not implemented', type: 'new_api_error', param: '', code: 'api_not_implemented' } } };
    }
    if (model !== undefined) return { kind: 'json', status: 200, body: { id: newId('standin-'), object: 'standin.result', model } };
  }
  if (method === 'GET') {
    if (path === '/v1/models') return { kind: 'json', status: 200, body: listModels(STANDIN_MODELS, rec.headers, rawQuery) };
    const m = MODEL_PATH.exec(path);
    if (m) return { kind: 'json', status: 200, body: retrieveModel(STANDIN_MODELS, m[1] ?? '', rec.headers) };
    if (path === '/v1beta/models') return { kind: 'json', status: 200, body: listGeminiModels(STANDIN_MODELS) };
    // The realtime handler's upgrader, on a request that asks for no switch (gorilla's returnError).
    if (path === '/v1/realtime')
      return { kind: 'raw', status: 400, body: Buffer.from('Bad Request\n'), contentType: 'text/plain; charset=utf-8', headers: { 'sec-websocket-version': '13' } };
    if (model !== undefined) return { kind: 'json', status: 200, body: { id: newId('standin-'), object: 'standin.result', model } };
    if (path === '/api/usage/token/') {
      return {
        kind: 'json',
        status: 200,
        body: {
          code: true,
          message: 'ok',
          data: {
            object: 'token_usage',
            name: 'demo',
            total_granted: 500000,
            total_used: 1234,
            total_available: 498766,
            unlimited_quota: false,
            model_limits: {},
            model_limits_enabled: false,
            expires_at: 0,
          },
        },
      };
    }
    if (path === '/api/log/token') return { kind: 'json', status: 200, body: { success: true, message: '', data: [] } };
  }
  if (path.startsWith('/api/')) return { kind: 'json', status: 200, body: { success: true, message: '', data: {} } };
  if (path.startsWith('/v1/dashboard/') || path.startsWith('/dashboard/')) {
    if (path.includes('subscription')) {
      return {
        kind: 'json',
        status: 200,
        body: {
          object: 'billing_subscription',
          has_payment_method: true,
          soft_limit_usd: 50,
          hard_limit_usd: 50,
          system_hard_limit_usd: 50,
          access_until: 0,
        },
      };
    }
    return { kind: 'json', status: 200, body: { object: 'list', total_usage: 123.4 } };
  }
  return noRoute(rec, method, path);
}

/** No route: new-api's NoRoute answers 404 under /v1 and /api (by the raw request URI), and the console's index page anywhere else. */
function noRoute(rec: RecordedRequest, method: string, path: string): Answer {
  if (rec.url.startsWith('/v1') || rec.url.startsWith('/api')) {
    return { kind: 'json', status: 404, body: { error: { message: `Invalid URL (${method} ${path})`, type: 'invalid_request_error', param: '', code: '' } } };
  }
  return { kind: 'raw', status: 200, body: Buffer.from(INDEX_PAGE), contentType: 'text/html; charset=utf-8' };
}

/** What the console's index page stands for. */
const INDEX_PAGE = '<!doctype html><html><head><title>New API</title></head><body><div id="root"></div></body></html>';

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

// --- OpenAI chat completions

function chatCompletion(body: Record<string, unknown>, promptTokens: number, n: number): Answer {
  const id = newId('chatcmpl-');
  const created = nowSeconds();
  const model = stringField(body, 'model', 'gpt-4o-mini');
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: COMPLETION_TOKENS,
    total_tokens: promptTokens + COMPLETION_TOKENS,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
  if (body['stream'] !== true) {
    return {
      kind: 'json',
      status: 200,
      body: {
        id,
        object: 'chat.completion',
        created,
        model,
        system_fingerprint: null,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: STANDIN_TEXT, refusal: null },
            logprobs: null,
            finish_reason: 'stop',
          },
        ],
        usage,
      },
    };
  }
  const so = body['stream_options'];
  const includeUsage = typeof so === 'object' && so !== null && (so as Record<string, unknown>)['include_usage'] === true;
  const chunk = (delta: Record<string, unknown>, finish: string | null): string =>
    sse({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });
  const frames = [chunk({ role: 'assistant', content: '' }, null)];
  for (const d of standinDeltas(n)) frames.push(chunk({ content: d }, null));
  frames.push(chunk({}, 'stop'));
  if (includeUsage) {
    frames.push(sse({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: null, choices: [], usage }));
  }
  frames.push(sse('[DONE]'));
  return { kind: 'stream', contentType: 'text/event-stream', frames };
}

// --- OpenAI responses

function responsesAnswer(body: Record<string, unknown>, promptTokens: number, n: number): Answer {
  const id = newId('resp_', 24);
  const msgId = newId('msg_', 24);
  const createdAt = nowSeconds();
  const model = stringField(body, 'model', 'gpt-4o-mini');
  const usage = {
    input_tokens: promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: COMPLETION_TOKENS,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: promptTokens + COMPLETION_TOKENS,
  };
  const part = (text: string): Record<string, unknown> => ({ type: 'output_text', text, annotations: [], logprobs: [] });
  const item = (status: string, content: unknown[]): Record<string, unknown> => ({
    type: 'message',
    id: msgId,
    status,
    role: 'assistant',
    content,
  });
  const response = (status: string, output: unknown[], u: unknown): Record<string, unknown> => ({
    id,
    object: 'response',
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: typeof body['instructions'] === 'string' ? body['instructions'] : null,
    max_output_tokens: null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: 'default',
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: u,
    user: null,
    metadata: {},
  });
  const done = response('completed', [item('completed', [part(STANDIN_TEXT)])], usage);
  if (body['stream'] !== true) return { kind: 'json', status: 200, body: done };

  let seq = 0;
  const ev = (type: string, fields: Record<string, unknown>): string => sse({ type, sequence_number: seq++, ...fields }, type);
  const where = { item_id: msgId, output_index: 0, content_index: 0 };
  const frames = [
    ev('response.created', { response: response('in_progress', [], null) }),
    ev('response.in_progress', { response: response('in_progress', [], null) }),
    ev('response.output_item.added', { output_index: 0, item: item('in_progress', []) }),
    ev('response.content_part.added', { ...where, part: part('') }),
  ];
  for (const d of standinDeltas(n)) frames.push(ev('response.output_text.delta', { ...where, delta: d, logprobs: [] }));
  frames.push(
    ev('response.output_text.done', { ...where, text: STANDIN_TEXT, logprobs: [] }),
    ev('response.content_part.done', { ...where, part: part(STANDIN_TEXT) }),
    ev('response.output_item.done', { output_index: 0, item: item('completed', [part(STANDIN_TEXT)]) }),
    ev('response.completed', { response: done }),
  );
  return { kind: 'stream', contentType: 'text/event-stream', frames };
}

// --- Anthropic messages

function anthropicMessage(body: Record<string, unknown>, promptTokens: number, n: number): Answer {
  const id = newId('msg_', 12);
  const model = stringField(body, 'model', 'claude-haiku-4-5');
  const message = (content: unknown[], stopReason: string | null, outputTokens: number): Record<string, unknown> => ({
    id,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: {
      input_tokens: promptTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: outputTokens,
      service_tier: 'standard',
    },
  });
  if (body['stream'] !== true) {
    return { kind: 'json', status: 200, body: message([{ type: 'text', text: STANDIN_TEXT }], 'end_turn', COMPLETION_TOKENS) };
  }
  const ev = (type: string, fields: Record<string, unknown>): string => sse({ type, ...fields }, type);
  const frames = [ev('message_start', { message: message([], null, 1) }), ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }), ev('ping', {})];
  for (const d of standinDeltas(n)) {
    frames.push(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: d } }));
  }
  frames.push(
    ev('content_block_stop', { index: 0 }),
    ev('message_delta', {
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: COMPLETION_TOKENS },
    }),
    ev('message_stop', {}),
  );
  return { kind: 'stream', contentType: 'text/event-stream', frames };
}

// --- Gemini

function geminiAnswer(model: string, stream: boolean, alt: boolean, promptTokens: number, n: number): Answer {
  const responseId = randomBytes(12).toString('base64url');
  const usage = (candidates: number): Record<string, unknown> => ({
    promptTokenCount: promptTokens,
    candidatesTokenCount: candidates,
    totalTokenCount: promptTokens + candidates,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: promptTokens }],
  });
  const chunk = (text: string, last: boolean, candidates: number): Record<string, unknown> => ({
    candidates: [
      {
        content: { role: 'model', parts: [{ text }] },
        ...(last ? { finishReason: 'STOP' } : {}),
        index: 0,
      },
    ],
    usageMetadata: usage(candidates),
    modelVersion: model,
    responseId,
  });
  if (!stream) return { kind: 'json', status: 200, body: chunk(STANDIN_TEXT, true, COMPLETION_TOKENS) };
  const deltas = standinDeltas(n);
  const chunks = deltas.map((d, i) => {
    const last = i === deltas.length - 1;
    return chunk(d, last, last ? COMPLETION_TOKENS : i + 1);
  });
  if (alt) return { kind: 'stream', contentType: 'text/event-stream', frames: chunks.map((c) => sse(c)) };
  // Without alt=sse the API streams one JSON array.
  const frames = chunks.map((c, i) => `${i === 0 ? '[' : ',\r\n'}${JSON.stringify(c)}`);
  frames.push(']');
  return { kind: 'stream', contentType: JSON_TYPE, frames };
}
