/**
 * The forwarding engine: http-proxy behind one module so it stays swappable.
 * It owns the http-proxy defects a sidecar must handle:
 * keep-alive agent, re-sent bodies, error listener, aborts in both directions,
 * hop-by-hop stripping, and SSE passing through unbuffered and uncompressed.
 */
import type http from 'node:http';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import {
  createProxyEngine,
  createUpstreamAgent,
  defaultForwardEngine,
  engineTarget,
  type ForwardEngineName,
  type ProxyEngine,
  type UpstreamAgentOptions,
} from './engine.js';
import { Errors, sendError } from '../errors.js';
import { filterResponseHeaders } from './headers.js';

export type ForwardOutcome = 'completed' | 'client-aborted' | 'upstream-aborted' | 'upstream-error' | 'intercepted';

export interface ForwardResult {
  outcome: ForwardOutcome;
  /** The relay's status, when it answered. */
  status: number | null;
  /** Time from sending to the relay's response headers. */
  upstreamMs: number | null;
  error?: Error;
}

export interface ForwardJob {
  req: IncomingMessage;
  res: ServerResponse;
  /** The already-read body to send, or null to send none. */
  body: Buffer | null;
  requestId: string;
  /**
   * Sees the relay's response before anything is written to the client;
   * returns true when it answered the client itself (the relay's body is drained).
   */
  intercept?: (upstream: IncomingMessage) => boolean;
  done?: (r: ForwardResult) => void;
  /** Response fields (lower-case names) added unless the relay sent a field of the same name. */
  extraHeaders?: Readonly<Record<string, string>>;
}

export interface ForwarderOptions extends UpstreamAgentOptions {
  upstream: URL;
  /** The proxy library (default: the one the benchmarks chose, see engine.ts). */
  engine?: ForwardEngineName;
  /** Counts event streams (text/event-stream answers) while they are open. */
  openStreams?: { inc(): void; dec(): void };
}

const JOB = Symbol('sluice.forwardJob');

/**
 * One forwarded exchange. The event handlers below are shared module-level functions that find
 * their exchange through a symbol on the emitter (the client request, the client response, the
 * relay's response), so a request allocates this object and no closures.
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

  constructor(
    readonly res: ServerResponse,
    readonly requestId: string,
    readonly intercept: ((upstream: IncomingMessage) => boolean) | undefined,
    readonly done: ((r: ForwardResult) => void) | undefined,
    readonly extraHeaders: Readonly<Record<string, string>> | undefined,
    readonly openStreams: ForwarderOptions['openStreams'],
    readonly sentAt: number,
  ) {}

  finish(outcome: ForwardOutcome, status: number | null, upstreamMs: number | null, error?: Error): void {
    if (this.finished) return;
    this.finished = true;
    if (this.streaming) this.openStreams!.dec();
    if (this.done) this.done(error === undefined ? { outcome, status, upstreamMs } : { outcome, status, upstreamMs, error });
  }
}

interface Carrier {
  [JOB]?: JobState;
}
type WithJob = IncomingMessage & Carrier;

/**
 * The already-read body, handed to the engine as its `buffer` option. The engines only call
 * `pipe(proxyReq)` on it; ending the request with the bytes directly sends headers and body in
 * one write, without a Readable and its ticks per request.
 */
class BodySource {
  constructor(private body: Buffer | null) {}
  pipe<T extends NodeJS.WritableStream>(dest: T): T {
    const body = this.body;
    // The engine keeps its options (this object) for the whole exchange, a stream for minutes:
    // drop the reference so a large prompt is freed once written, not when the stream ends.
    this.body = null;
    if (body === null) dest.end();
    else dest.end(body);
    return dest;
  }
}
const NO_BODY = new BodySource(null);

// A client that leaves stops the relay's work: http-proxy 1.18.1 would let it run on.
function onClientClose(this: ServerResponse & Carrier): void {
  const state = this[JOB];
  if (!state || this.writableFinished) return;
  state.proxyReq?.destroy();
  state.finish('client-aborted', state.status, state.upstreamMs);
}

// A relay that dies mid-body must end the client's stream visibly, not leave it hanging.
function onRelayClose(this: IncomingMessage & Carrier): void {
  const state = this[JOB];
  if (!state || this.complete) return;
  state.res.destroy();
  state.finish('upstream-aborted', state.status, state.upstreamMs);
}

function onRelayEnd(this: IncomingMessage & Carrier): void {
  this[JOB]?.res.end();
}

function onRelayData(this: IncomingMessage & Carrier, chunk: Buffer): void {
  const state = this[JOB]!;
  if (!state.res.write(chunk)) {
    this.pause();
    state.res.once('drain', onClientDrain);
  }
}

function onClientDrain(this: ServerResponse & Carrier): void {
  this[JOB]?.up?.resume();
}

function onClientFinish(this: ServerResponse & Carrier): void {
  const state = this[JOB];
  if (state) state.finish('completed', state.status, state.upstreamMs);
}

function onProxyReq(proxyReq: ClientRequest, req: IncomingMessage): void {
  const state = (req as WithJob)[JOB];
  if (!state) return;
  state.proxyReq = proxyReq;
  // The client left while the relay connection was still being made: do not send the request at all.
  if (state.res.destroyed && !state.res.writableFinished) proxyReq.destroy();
}

function onProxyRes(up: IncomingMessage, req: IncomingMessage, res: ServerResponse): void {
  const state = (req as WithJob)[JOB];
  if (!state) {
    up.destroy();
    return;
  }
  const upstreamMs = performance.now() - state.sentAt;
  const status = up.statusCode ?? 502;
  state.status = status;
  state.upstreamMs = upstreamMs;
  if (res.destroyed) {
    up.destroy();
    return;
  }
  if (state.intercept !== undefined && state.intercept(up)) {
    up.resume();
    state.finish('intercepted', status, upstreamMs);
    return;
  }
  const headers = filterResponseHeaders(up.rawHeaders);
  const extra = state.extraHeaders;
  if (extra !== undefined) {
    // sluice's own fields go out only where the relay sent none of the same name.
    for (const name in extra) if (up.headers[name] === undefined) headers.push(name, extra[name]!);
  }
  res.writeHead(status, up.statusMessage, headers);
  const ct = up.headers['content-type'];
  if (ct !== undefined && ct.startsWith('text/event-stream')) {
    // Send headers now: a reasoning model may think for minutes before its first event.
    res.flushHeaders();
    if (state.openStreams !== undefined) {
      state.streaming = true;
      state.openStreams.inc();
    }
  }
  state.up = up;
  (up as IncomingMessage & Carrier)[JOB] = state;
  up.on('close', onRelayClose);
  up.on('end', onRelayEnd);
  up.on('data', onRelayData);
  res.on('finish', onClientFinish);
}

function onProxyError(err: Error, req: IncomingMessage, res: ServerResponse): void {
  const state = (req as WithJob)[JOB];
  if (!state || state.finished) return;
  if (res.headersSent) {
    res.destroy();
    state.finish('upstream-aborted', state.status, state.upstreamMs, err);
    return;
  }
  // (req.destroyed says nothing here: a fully read request is destroyed once consumed.)
  if (res.destroyed || res.writableEnded) {
    state.finish('client-aborted', null, null, err);
    return;
  }
  // Never replay: a POST the relay may have started is answered 502, not retried.
  sendError(res, Errors.UPSTREAM_UNREACHABLE, state.requestId);
  state.finish('upstream-error', null, null, err);
}

export class Forwarder {
  private readonly proxy: ProxyEngine;
  readonly agent: http.Agent;
  readonly engine: ForwardEngineName;
  private readonly target: Record<string, string>;
  private readonly openStreams: ForwarderOptions['openStreams'];

  constructor(opts: ForwarderOptions) {
    this.openStreams = opts.openStreams;
    this.agent = createUpstreamAgent(opts.upstream, opts);
    this.target = engineTarget(opts.upstream);
    this.engine = opts.engine ?? defaultForwardEngine();
    this.proxy = createProxyEngine(this.engine, {
      agent: this.agent,
      selfHandleResponse: true,
      xfwd: false,
      changeOrigin: true,
      ws: false,
    });
    this.proxy.on('proxyReq', onProxyReq);
    this.proxy.on('proxyRes', onProxyRes);
    this.proxy.on('error', onProxyError);
  }

  forward(job: ForwardJob): void {
    const { req, res } = job;
    const state = new JobState(res, job.requestId, job.intercept, job.done, job.extraHeaders, this.openStreams, performance.now());
    (req as WithJob)[JOB] = state;
    (res as ServerResponse & Carrier)[JOB] = state;
    res.on('close', onClientClose);
    this.proxy.web(req, res, {
      target: this.target,
      buffer: job.body === null ? NO_BODY : new BodySource(job.body),
    });
  }

  close(): void {
    this.agent.destroy();
    this.proxy.close();
  }
}
