/**
 * Forwarding to the relay with http-proxy. This module owns the http-proxy defects a sidecar must
 * handle: keep-alive agent (agent.ts), re-sent bodies, error listener, aborts in both directions,
 * hop-by-hop stripping, and SSE passing through unbuffered and uncompressed. It also bounds the
 * wait for the relay's response headers (`upstream.headersTimeoutSeconds`, 504) and an answer's
 * silences (`upstream.idleTimeoutSeconds`), and tells a
 * process out of descriptors (503 out_of_sockets) from a relay that cannot be reached (502).
 * A WebSocket upgrade is forwarded the same way; once the relay switches, its session is
 * tunnel.ts's.
 */
import type http from 'node:http';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import type { Url } from 'node:url';
import httpProxy from 'http-proxy';
import { createUpstreamAgent, type UpstreamAgentOptions } from './agent.js';
import type { BodyLease } from '../http/body-budget.js';
import { dropRest } from '../http/body.js';
import { TurnBatch } from '../runtime/turn-batch.js';
import { Refusals, sendRefusal, type Fields } from '../answers/refusals.js';
import type { Outcome } from '../answers/outcome.js';
import { filterResponseHeaders } from './headers.js';
import { ExchangeList } from './exchange-list.js';
import { UpgradeResponse } from '../http/upgrade.js';
import { Tunnel } from './tunnel.js';

/** How a forwarded exchange ended, in the request path's own vocabulary (src/answers/outcome.ts says what each means). */
export type ForwardOutcome = Extract<Outcome, 'admitted' | 'client_aborted' | 'upstream_aborted' | 'answer_stalled' | 'upstream_error' | 'upstream_timeout' | 'out_of_sockets'>;

export interface ForwardResult {
  /** 'intercepted': the job's `intercept` answered the client itself, and recorded its own outcome. */
  outcome: ForwardOutcome | 'intercepted';
  /** The status the client was answered with: the relay's, or that of sluice's own answer (502, 503, 504). */
  status: number | null;
  /** Time from sending to the relay's response headers. */
  upstreamMs: number | null;
  error?: Error;
  /** Why sluice cut an answer (`answer_stalled`): the relay sent nothing, or the client read nothing. */
  reason?: 'relay_silent' | 'client_not_reading';
}

export interface ForwardJob {
  req: IncomingMessage;
  res: ServerResponse;
  /** The already-read body to send, or null to send none. */
  body: Buffer | null;
  /** What the body holds of the bodies' budget: released once it is handed to the relay's socket. */
  lease?: BodyLease | null;
  requestId: string;
  /**
   * Sees the relay's response before anything is written to the client;
   * returns true when it answered the client itself (the relay's body is drained).
   */
  intercept?: (upstream: IncomingMessage) => boolean;
  done?: (r: ForwardResult) => void;
  /**
   * Response fields (lower-case names) added unless the relay sent a field of the same name; on an
   * answer carrying the relay's CORS headers, the fields added are also exposed to a page.
   */
  extraHeaders?: Readonly<Record<string, string>>;
  /** The relay's CORS fields, which sluice's own answers to this call carry (a cross-origin call). */
  cors?: Fields;
  /**
   * Called once the relay switched on a WebSocket upgrade (its `res` an UpgradeResponse,
   * src/http/upgrade.ts) and the session opened (openTunnel, tunnel.ts); not when the switch is
   * refused (the exchange already finished, or sessions cut). `done` comes when the session ends.
   */
  switched?: () => void;
}

export interface ForwarderOptions extends UpstreamAgentOptions {
  upstream: URL;
  /** Counts event streams (text/event-stream answers) and WebSocket sessions while they are open. */
  openStreams?: { inc(): void; dec(): void };
  /** Bound on the wait for the relay's response headers, in seconds (0 or absent: none). */
  headersTimeoutSeconds?: number;
  /** Bound on an answer's silences once its headers are passed on, and a WebSocket session's both ways, in seconds (0 or absent: none). */
  idleTimeoutSeconds?: number;
  /** Called when a relay connection could not be opened for want of descriptors. */
  onOutOfSockets?: (err: Error) => void;
}

/** What every exchange of one Forwarder shares. */
class ForwarderContext {
  /**
   * Exchanges waiting for the relay's response headers, oldest first. One interval sweeps the
   * lists rather than a timer per request, so a reload's new bound applies to the exchanges
   * already in them.
   */
  readonly waiting = new ExchangeList<JobState>();
  /** Exchanges whose answer is being passed on, watched for silences (WebSocket sessions too). */
  readonly answering = new ExchangeList<JobState>();
  /** WebSocket sessions open: Node's server neither closes nor times out a connection it handed over as an upgrade. */
  readonly tunnels = new Set<JobState>();
  /** Sessions were cut (a drain's deadline, closing): a relay that switches from now on is refused. */
  cut = false;
  headersTimeoutMs = 0;
  idleTimeoutMs = 0;

  constructor(
    readonly openStreams: ForwarderOptions['openStreams'],
    readonly onOutOfSockets: ForwarderOptions['onOutOfSockets'],
  ) {}

  sweep(now: number): void {
    this.sweepWaiting(now);
    this.sweepAnswering(now);
  }

  /** Answers 504 to every exchange that has waited `headersTimeoutMs` or longer, and aborts its relay request. */
  private sweepWaiting(now: number): void {
    const limit = this.headersTimeoutMs;
    if (limit <= 0) return;
    // Exchanges join at the tail as they are sent, so the oldest are at the head.
    while (this.waiting.head !== null && now - this.waiting.head.sentAt >= limit) {
      const s = this.waiting.head;
      this.waiting.remove(s);
      if (s.finished) continue;
      sendRefusal(s.res, Refusals.UPSTREAM_TIMEOUT, s.requestId, { params: { seconds: limit / 1000 }, cors: s.cors });
      s.finish('upstream_timeout', Refusals.UPSTREAM_TIMEOUT.status, null);
      // Its error (socket hang up) then finds the exchange finished and answers nothing more.
      s.proxyReq?.destroy();
    }
  }

  /**
   * Cuts every answer none of whose bytes moved for `idleTimeoutMs`: the relay sent nothing, and
   * the client freed no room for what waits. Its status is committed to, so the client's
   * connection is closed, as when the relay cuts its answer; the relay's is closed too.
   */
  private sweepAnswering(now: number): void {
    const limit = this.idleTimeoutMs;
    if (limit <= 0) return;
    // Not in order of silence (a byte moving does not move its exchange): every one is looked at.
    let s = this.answering.head;
    while (s !== null) {
      const next = s.next;
      if (now - s.movedAt >= limit) {
        const res = s.res;
        // Bytes wait for the client, or the relay's answer is all in: the client is not reading.
        // (A WebSocket session's silence is both sides': `relay_silent` says the client sent nothing either.)
        const waiting = s.tunnel !== null ? s.tunnel.clientBehind : res.writableLength > 0 || s.up?.complete === true;
        const reason = waiting ? 'client_not_reading' : 'relay_silent';
        s.finish('answer_stalled', s.status, s.upstreamMs, new Error(`no byte of the answer moved for ${limit / 1000} s`), reason);
        s.up?.destroy();
        res.destroy();
      }
      s = next;
    }
  }
}

const JOB = Symbol('sluice.forwardJob');

/**
 * One forwarded exchange. The event handlers below are shared module-level functions that find
 * their exchange through a symbol on the emitter (the client request, the client response, the
 * relay's response). An Exchange class with per-request closures and a WeakMap kept dead requests
 * alive through young-generation collections, and cost throughput (docs/performance.md, bd4fc51).
 */
class JobState {
  proxyReq: ClientRequest | null = null;
  up: IncomingMessage | null = null;
  finished = false;
  /** Set once the relay answered. */
  status: number | null = null;
  upstreamMs: number | null = null;
  /** Counted in `openStreams` until finished. */
  streaming = false;
  /** In one of the context's lists (ExchangeList). */
  list: ExchangeList<JobState> | null = null;
  prev: JobState | null = null;
  next: JobState | null = null;
  /** When a byte of the answer last moved: from the relay, or out to a client that had no room; in a session, either way. */
  movedAt = 0;

  /** The body to send and what it holds of the budget, until the exchange is handed to http-proxy. */
  body: Buffer | null = null;
  lease: BodyLease | null = null;
  /** What sluice's own answer to it carries (ForwardJob.cors). */
  cors: Fields | undefined = undefined;
  /** An open WebSocket session (tunnel.ts). */
  tunnel: Tunnel | null = null;
  switched: (() => void) | undefined = undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly requestId: string,
    readonly intercept: ((upstream: IncomingMessage) => boolean) | undefined,
    readonly done: ((r: ForwardResult) => void) | undefined,
    readonly extraHeaders: Readonly<Record<string, string>> | undefined,
    readonly ctx: ForwarderContext,
    readonly sentAt: number,
  ) {}

  finish(outcome: ForwardResult['outcome'], status: number | null, upstreamMs: number | null, error?: Error, reason?: ForwardResult['reason']): void {
    if (this.finished) return;
    this.finished = true;
    this.list?.remove(this);
    // A relay that answered without reading the whole request body (and stopped reading) would
    // otherwise keep its connection, and the body's unsent bytes in its write queue, forever.
    if (this.proxyReq !== null && !this.proxyReq.writableFinished) this.proxyReq.destroy();
    if (this.tunnel !== null) {
      this.ctx.tunnels.delete(this);
      // A session ends for both sides at once: whichever closed, the other is closed too.
      this.tunnel.close();
    }
    if (this.streaming) this.ctx.openStreams!.dec();
    if (this.done === undefined) return;
    const r: ForwardResult = { outcome, status, upstreamMs };
    if (error !== undefined) r.error = error;
    if (reason !== undefined) r.reason = reason;
    this.done(r);
  }
}

interface Carrier {
  [JOB]?: JobState;
}
type WithJob = IncomingMessage & Carrier;

/**
 * The already-read body as the stream http-proxy sends (its `buffer` option); the gateway has set
 * `content-length` to its length and removed `transfer-encoding`. Pushed in before it is read,
 * not `Readable.from([body])`: that keeps the array, and with it the body, for as long as the
 * stream lives, and http-proxy holds its options (this stream) until the exchange ends, minutes
 * for an event stream. Read, this one holds nothing.
 */
function bodyStream(body: Buffer | null): Readable {
  const stream = new Readable({ read() {} });
  if (body !== null) stream.push(body);
  stream.push(null);
  return stream;
}

// A client that leaves stops the relay's work: http-proxy 1.18.1 would let it run on.
function onClientClose(this: ServerResponse & Carrier): void {
  const state = this[JOB];
  if (!state || this.writableFinished) return;
  // A WebSocket session ends when either side closes its connection: its end, not an abort.
  if (state.tunnel !== null) return state.finish('admitted', state.status, state.upstreamMs);
  state.proxyReq?.destroy();
  state.finish('client_aborted', state.status, state.upstreamMs);
}

// A relay that dies mid-body must end the client's stream visibly, not leave it hanging.
function onRelayClose(this: IncomingMessage & Carrier): void {
  const state = this[JOB];
  if (!state || this.complete) return;
  state.res.destroy();
  state.finish('upstream_aborted', state.status, state.upstreamMs);
}

function onRelayEnd(this: IncomingMessage & Carrier): void {
  this[JOB]?.res.end();
}

function onRelayData(this: IncomingMessage & Carrier, chunk: Buffer): void {
  const state = this[JOB]!;
  state.movedAt = performance.now();
  if (!state.res.write(chunk)) {
    this.pause();
    state.res.once('drain', onClientDrain);
  }
}

function onClientDrain(this: ServerResponse & Carrier): void {
  const state = this[JOB];
  if (!state) return;
  state.movedAt = performance.now();
  state.up?.resume();
}

function onClientFinish(this: ServerResponse & Carrier): void {
  const state = this[JOB];
  if (state) state.finish('admitted', state.status, state.upstreamMs);
}

/**
 * The relay switched protocols. On a WebSocket upgrade the session begins (openTunnel); on one
 * already ended (answered 504, its client gone, or cut at a drain's deadline) the relay's socket
 * is closed. Anywhere else sluice asked for no switch (it strips `Upgrade`): Node's client then emits neither a
 * response nor an error, only 'upgrade' to a listener (without one it closes the socket in
 * silence), and the client would wait out upstream.headersTimeoutSeconds. Answered 502 at once
 * instead, and the connection closed: what follows on it is no HTTP.
 */
function onRelayUpgrade(this: ClientRequest & Carrier, up: IncomingMessage, socket: Duplex, head: Buffer): void {
  const state = this[JOB];
  if (state !== undefined && !state.finished && state.res instanceof UpgradeResponse && !state.ctx.cut) return openTunnel(state, state.res, up, socket, head);
  socket.destroy();
  if (state) refuseSwitch(state);
}

/**
 * Opens the WebSocket session of an upgrade whose relay switched (tunnel.ts). It ends when either
 * side closes (the exchange's end, `admitted` with status 101: its access line comes then); it
 * counts among the open streams, and its silences (both sides') are bounded by
 * upstream.idleTimeoutSeconds.
 */
function openTunnel(state: JobState, res: UpgradeResponse, up: IncomingMessage, relay: Duplex, relayHead: Buffer): void {
  state.list?.remove(state);
  if (res.socket === null || res.socket.destroyed) {
    relay.destroy();
    return state.finish('client_aborted', null, null);
  }
  state.status = 101;
  state.upstreamMs = performance.now() - state.sentAt;
  state.tunnel = new Tunnel(res, relay, up, relayHead, state.extraHeaders ?? {}, {
    moved: () => void (state.movedAt = performance.now()),
    ended: () => state.finish('admitted', state.status, state.upstreamMs),
  });
  state.ctx.tunnels.add(state);
  state.switched?.();
  if (state.ctx.openStreams !== undefined) {
    state.streaming = true;
    state.ctx.openStreams.inc();
  }
  if (state.ctx.idleTimeoutMs > 0) {
    state.movedAt = performance.now();
    state.ctx.answering.add(state);
  }
}

const SWITCHED = 'the relay answered 101 Switching Protocols to a request that asked for no protocol switch';
const SWITCHED_LATE = 'the relay switched protocols after the upgrade ended (answered, left, or cut)';

function refuseSwitch(state: JobState): void {
  refuseInvalid(state, state.res instanceof UpgradeResponse ? SWITCHED_LATE : SWITCHED);
}

/** A relay answer that cannot be passed on: 502 at once, and the relay connection closed. */
function refuseInvalid(state: JobState, why: string): void {
  if (state.finished) return;
  const err = new Error(why);
  if (state.res.destroyed || state.res.writableEnded) return state.finish('client_aborted', null, null, err);
  sendRefusal(state.res, Refusals.UPSTREAM_UNREACHABLE, state.requestId, { cors: state.cors });
  state.finish('upstream_error', Refusals.UPSTREAM_UNREACHABLE.status, performance.now() - state.sentAt, err);
}

function onProxyReq(proxyReq: ClientRequest, req: IncomingMessage): void {
  const state = (req as WithJob)[JOB];
  if (!state) return;
  state.proxyReq = proxyReq;
  (proxyReq as ClientRequest & Carrier)[JOB] = state;
  proxyReq.on('upgrade', onRelayUpgrade);
  // The body's share of the budget goes back once it is in the relay socket's hands (the
  // request's 'finish'), not when the answer ends: a stream may run for minutes after.
  const lease = state.lease;
  state.lease = null;
  if (lease !== null) proxyReq.once('finish', () => lease.release());
  // The client left while the relay connection was still being made: do not send the request at all.
  if (state.res.destroyed && !state.res.writableFinished) proxyReq.destroy();
}

/**
 * What of a relay answer that sluice replaced is read and dropped, so that its connection serves
 * again; past it, or past the time, the connection is closed (its body may never end).
 */
const DROP_MAX_BYTES = 64 * 1024;
const DROP_MAX_MS = 1000;

/** What Node's writeHead refuses in a reason phrase (its checkInvalidHeaderChar). */
const INVALID_REASON = /[^\t\x20-\x7e\x80-\xff]/;
/** A media type is compared ignoring case (RFC 9110, 8.3.1). */
const EVENT_STREAM = /^text\/event-stream/i;

function onProxyRes(up: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
  const state = (req as WithJob)[JOB];
  if (!state) {
    up.destroy();
    return;
  }
  state.list?.remove(state);
  if (state.finished) {
    // Answered already (the headers came after sluice's 504).
    up.destroy();
    return;
  }
  if (up.statusCode === 101) {
    // A 101 without `Upgrade` reaches here as a response: the same refusal, never passed on.
    up.destroy();
    state.proxyReq?.destroy();
    return refuseSwitch(state);
  }
  const upstreamMs = performance.now() - state.sentAt;
  const status = up.statusCode ?? 502;
  if (status < 100 || status > 999) {
    // Node's writeHead throws on such a status: not an answer to pass on, and not worth the process.
    up.destroy();
    state.proxyReq?.destroy();
    return refuseInvalid(state, `the relay answered with status ${status}, which HTTP does not allow`);
  }
  state.status = status;
  state.upstreamMs = upstreamMs;
  if (res.destroyed) {
    up.destroy();
    return;
  }
  if (state.intercept?.(up)) {
    dropRest(up, DROP_MAX_BYTES, DROP_MAX_MS);
    state.finish('intercepted', status, upstreamMs);
    return;
  }
  const headers = filterResponseHeaders(up.rawHeaders);
  const extra = state.extraHeaders;
  if (extra !== undefined) {
    // sluice's own fields go out only where the relay sent none of the same name.
    let added = '';
    for (const name in extra) {
      if (up.headers[name] !== undefined) continue;
      headers.push(name, extra[name]!);
      added = added === '' ? name : `${added}, ${name}`;
    }
    // An answer the relay made readable cross-origin: a page can read the fields sluice added too.
    // A line of its own, so the relay's own Access-Control-Expose-Headers, if any, stays as it was
    // (a browser joins repeated lines of a list field).
    if (added !== '' && up.headers['access-control-allow-origin'] !== undefined) headers.push('access-control-expose-headers', added);
  }
  // Node's parser takes characters in a reason phrase that writeHead refuses (a control
  // character): the answer passes with its status's own phrase, which clients ignore anyway.
  const reason = up.statusMessage !== undefined && !INVALID_REASON.test(up.statusMessage) ? up.statusMessage : undefined;
  try {
    res.writeHead(status, reason, headers);
  } catch (err) {
    // Anything else writeHead refuses is not an answer to pass on, and not worth the process.
    // Joining the one field sluice may have set before (a drain's `connection: close`; the relay's
    // own is hop-by-hop, never passed), it may have taken some of the relay's before it threw:
    // none of them goes out with the 502.
    for (const name of res.getHeaderNames()) if (name !== 'connection') res.removeHeader(name);
    // Node 20's writeHead took the relay's reason phrase too.
    res.statusMessage = '';
    up.destroy();
    state.proxyReq?.destroy();
    return refuseInvalid(state, `the relay's answer cannot be passed on: ${(err as Error).message}`);
  }
  const ct = up.headers['content-type'];
  const eventStream = ct !== undefined && EVENT_STREAM.test(ct);
  if (eventStream || up.headers['transfer-encoding'] !== undefined) {
    // Send headers now: a reasoning model may think for minutes before its first event, and an
    // answer of unknown length may be a stream of another type.
    res.flushHeaders();
  }
  if (eventStream && state.ctx.openStreams !== undefined) {
    state.streaming = true;
    state.ctx.openStreams.inc();
  }
  state.up = up;
  (up as IncomingMessage & Carrier)[JOB] = state;
  up.on('close', onRelayClose);
  up.on('end', onRelayEnd);
  up.on('data', onRelayData);
  res.on('finish', onClientFinish);
  if (state.ctx.idleTimeoutMs > 0) {
    state.movedAt = performance.now();
    state.ctx.answering.add(state);
  }
}

function onProxyError(err: Error, req: IncomingMessage): void {
  const state = (req as WithJob)[JOB];
  // An open WebSocket session ends by its sockets' 'close' alone: nothing HTTP goes onto it.
  if (!state || state.finished || state.tunnel !== null) return;
  const res = state.res;
  if (res.headersSent) {
    res.destroy();
    state.finish('upstream_aborted', state.status, state.upstreamMs, err);
    return;
  }
  // (req.destroyed says nothing here: a fully read request is destroyed once consumed.)
  if (res.destroyed || res.writableEnded) {
    state.finish('client_aborted', null, null, err);
    return;
  }
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EMFILE' || code === 'ENFILE') {
    // The relay is not at fault: sluice has no descriptor left to reach it with.
    sendRefusal(res, Refusals.OUT_OF_SOCKETS, state.requestId, { cors: state.cors });
    state.finish('out_of_sockets', Refusals.OUT_OF_SOCKETS.status, null, err);
    state.ctx.onOutOfSockets?.(err);
    return;
  }
  // Never replay: a POST the relay may have started is answered 502, not retried.
  sendRefusal(res, Refusals.UPSTREAM_UNREACHABLE, state.requestId, { cors: state.cors });
  state.finish('upstream_error', Refusals.UPSTREAM_UNREACHABLE.status, null, err);
}

/**
 * The relay as http-proxy's target: http-proxy joins `path` (the relay's base path, if any) with
 * the request's path, collapsing repeated slashes.
 */
function targetOf(upstream: URL): Partial<Url> {
  const secure = upstream.protocol === 'https:';
  return {
    protocol: upstream.protocol,
    host: upstream.hostname,
    port: upstream.port || (secure ? '443' : '80'),
    path: upstream.pathname === '/' ? '' : upstream.pathname.replace(/\/$/, ''),
  };
}

/** How often exchanges are checked against their time bounds. */
const SWEEP_MS = 1000;

export class Forwarder {
  private readonly proxy: httpProxy;
  readonly agent: http.Agent;
  private readonly target: Partial<Url>;
  private readonly ctx: ForwarderContext;
  /** One interval for every exchange's time bounds, not a timer per request. */
  private sweeper: NodeJS.Timeout | null = null;

  constructor(opts: ForwarderOptions) {
    this.ctx = new ForwarderContext(opts.openStreams, opts.onOutOfSockets);
    this.setHeadersTimeout(opts.headersTimeoutSeconds ?? 0);
    this.setIdleTimeout(opts.idleTimeoutSeconds ?? 0);
    this.agent = createUpstreamAgent(opts.upstream, opts);
    this.target = targetOf(opts.upstream);
    this.proxy = httpProxy.createProxyServer({
      agent: this.agent,
      selfHandleResponse: true,
      xfwd: false,
      changeOrigin: true,
      ws: false,
      // The path goes out as sluice judged it (routing/target.ts: forwardUrl). Without this,
      // http-proxy rebuilds it with url.parse, which turns every `\` into `/`: `/v1\chat\completions`,
      // judged as no route (no free tier, no per-IP rule), would reach the relay as /v1/chat/completions.
      toProxy: true,
    });
    this.proxy.on('proxyReq', onProxyReq);
    this.proxy.on('proxyRes', onProxyRes);
    this.proxy.on('error', onProxyError);
  }

  forward(job: ForwardJob): void {
    const { req, res } = job;
    const state = new JobState(req, res, job.requestId, job.intercept, job.done, job.extraHeaders, this.ctx, performance.now());
    (req as WithJob)[JOB] = state;
    (res as ServerResponse & Carrier)[JOB] = state;
    res.on('close', onClientClose);
    if (this.ctx.headersTimeoutMs > 0) this.ctx.waiting.add(state);
    state.body = job.body;
    state.lease = job.lease ?? null;
    state.cors = job.cors;
    state.switched = job.switched;
    this.turn.add(state);
  }

  /**
   * Hands every exchange forwarded during this event-loop turn to http-proxy together, at the
   * turn's end (src/runtime/turn-batch.ts).
   * Sent one by one as each body is read, the requests would reach the relay spread over the
   * turn, and the relay would wake once for each; sent back to back, it reads them in one wake-up
   * and its answers come back together too, so both processes handle a turn's worth of requests
   * per wake-up. A store round trip gives the free path this batching anyway; this gives it to
   * every request, for the cost of waiting out the rest of the current turn.
   */
  private readonly turn = new TurnBatch<JobState>((turn) => {
    for (const state of turn) {
      const body = state.body;
      state.body = null;
      // The client left before the turn ended: nothing goes to the relay (its 'close' finishes the exchange).
      if (state.finished || state.res.destroyed) {
        state.lease?.release();
        state.lease = null;
        // Its 'close' came before the exchange listened: finished here, or it would wait out the headers bound.
        state.finish('client_aborted', null, null);
      } else {
        this.proxy.web(state.req, state.res, { target: this.target, buffer: bodyStream(body) });
      }
    }
  });

  /** Sets the bound on the wait for the relay's response headers (0: none); a reload may change it. */
  setHeadersTimeout(seconds: number): void {
    this.ctx.headersTimeoutMs = seconds * 1000;
    if (seconds <= 0) this.ctx.waiting.clear();
    this.sweepWhileBounded();
  }

  /** Sets the bound on an answer's silences (0: none); a reload may change it. */
  setIdleTimeout(seconds: number): void {
    this.ctx.idleTimeoutMs = seconds * 1000;
    if (seconds <= 0) this.ctx.answering.clear();
    this.sweepWhileBounded();
  }

  private sweepWhileBounded(): void {
    const bounded = this.ctx.headersTimeoutMs > 0 || this.ctx.idleTimeoutMs > 0;
    if (bounded && this.sweeper === null) {
      this.sweeper = setInterval(() => this.ctx.sweep(performance.now()), SWEEP_MS);
      this.sweeper.unref();
    } else if (!bounded && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /**
   * Closes every open WebSocket session (a drain's deadline, or closing): Node's server no longer holds their
   * connections, so closing its connections leaves them open. Each ends as a client that left
   * (`client_aborted`, which the drain's deadline makes `drain_deadline`).
   */
  cutTunnels(): void {
    this.ctx.cut = true;
    for (const state of [...this.ctx.tunnels]) state.finish('client_aborted', state.status, state.upstreamMs);
  }

  close(): void {
    this.cutTunnels();
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    this.agent.destroy();
    this.proxy.close();
  }
}
