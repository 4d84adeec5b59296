/**
 * Forwarding to the relay with http-proxy. This module owns the http-proxy defects a sidecar must
 * handle (field notes): keep-alive agent (agent.ts), re-sent bodies, error listener, aborts in both directions,
 * hop-by-hop stripping, and SSE passing through unbuffered and uncompressed. It also bounds the
 * wait for the relay's response headers (`upstream.headersTimeoutSeconds`, 504) and tells a
 * process out of descriptors (503 out_of_sockets) from a relay that cannot be reached (502).
 */
import type http from 'node:http';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import type { Url } from 'node:url';
import httpProxy from 'http-proxy';
import { createUpstreamAgent, type UpstreamAgentOptions } from './agent.js';
import type { BodyLease } from '../http/body-budget.js';
import { TurnBatch } from '../runtime/turn-batch.js';
import { Refusals, sendRefusal } from '../answers/refusals.js';
import type { Outcome } from '../answers/outcome.js';
import { filterResponseHeaders } from './headers.js';

/** How a forwarded exchange ended, in the request path's own vocabulary (src/answers/outcome.ts says what each means). */
export type ForwardOutcome = Extract<Outcome, 'admitted' | 'client_aborted' | 'upstream_aborted' | 'upstream_error' | 'upstream_timeout' | 'out_of_sockets'>;

export interface ForwardResult {
  /** 'intercepted': the job's `intercept` answered the client itself, and recorded its own outcome. */
  outcome: ForwardOutcome | 'intercepted';
  /** The status the client was answered with: the relay's, or that of sluice's own answer (502, 503, 504). */
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
}

export interface ForwarderOptions extends UpstreamAgentOptions {
  upstream: URL;
  /** Counts event streams (text/event-stream answers) while they are open. */
  openStreams?: { inc(): void; dec(): void };
  /** Bound on the wait for the relay's response headers, in seconds (0 or absent: none). */
  headersTimeoutSeconds?: number;
  /** Called when a relay connection could not be opened for want of descriptors. */
  onOutOfSockets?: (err: Error) => void;
}

/** What every exchange of one Forwarder shares. */
class ForwarderContext {
  /**
   * Exchanges waiting for the relay's response headers, in the order they were sent (a Set keeps
   * insertion order: the oldest first). One interval sweeps them rather than a timer per request:
   * a reload's new bound applies to the exchanges already waiting, and a request adds a Set entry.
   */
  readonly waiting = new Set<Exchange>();
  headersTimeoutMs = 0;

  constructor(
    readonly openStreams: ForwarderOptions['openStreams'],
    readonly onOutOfSockets: ForwarderOptions['onOutOfSockets'],
  ) {}

  /** Answers 504 to every exchange that has waited `headersTimeoutMs` or longer, and aborts its relay request. */
  sweep(now: number): void {
    const limit = this.headersTimeoutMs;
    if (limit <= 0) return;
    for (const exchange of this.waiting) {
      if (now - exchange.sentAt < limit) break;
      this.waiting.delete(exchange);
      exchange.timedOut(limit);
    }
  }
}

const SWITCHED = 'the relay answered 101 Switching Protocols to a request that asked for no protocol switch';

/** One forwarded exchange: the client's request and response, and the relay's once it answers. */
class Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  private readonly requestId: string;
  private readonly intercept: ForwardJob['intercept'];
  private readonly done: ForwardJob['done'];
  private readonly extraHeaders: ForwardJob['extraHeaders'];
  readonly sentAt = performance.now();
  /** The body to send and what it holds of the budget, until the exchange is handed to http-proxy. */
  body: Buffer | null;
  lease: BodyLease | null;
  private proxyReq: ClientRequest | null = null;
  finished = false;
  /** Set once the relay answered. */
  private status: number | null = null;
  private upstreamMs: number | null = null;
  /** Counted in `openStreams` until finished. */
  private streaming = false;

  constructor(
    job: ForwardJob,
    private readonly ctx: ForwarderContext,
  ) {
    this.req = job.req;
    this.res = job.res;
    this.requestId = job.requestId;
    this.intercept = job.intercept;
    this.done = job.done;
    this.extraHeaders = job.extraHeaders;
    this.body = job.body;
    this.lease = job.lease ?? null;
    // A client that leaves stops the relay's work: http-proxy 1.18.1 would let it run on.
    this.res.on('close', () => {
      if (this.res.writableFinished) return;
      this.proxyReq?.destroy();
      this.finish('client_aborted', this.status, this.upstreamMs);
    });
  }

  /** http-proxy made the relay request (its 'proxyReq' event). */
  sent(proxyReq: ClientRequest): void {
    this.proxyReq = proxyReq;
    proxyReq.on('upgrade', (_up: IncomingMessage, socket: Duplex) => {
      socket.destroy();
      this.refuseSwitch();
    });
    // The body's share of the budget goes back once it is in the relay socket's hands (the
    // request's 'finish'), not when the answer ends: a stream may run for minutes after.
    const lease = this.lease;
    this.lease = null;
    if (lease !== null) proxyReq.once('finish', () => lease.release());
    // The client left while the relay connection was still being made: do not send the request at all.
    if (this.res.destroyed && !this.res.writableFinished) proxyReq.destroy();
  }

  /** The relay's response headers came (http-proxy's 'proxyRes' event). */
  answered(up: IncomingMessage): void {
    const res = this.res;
    this.ctx.waiting.delete(this);
    if (this.finished) {
      // Answered already (the headers came after sluice's 504).
      up.destroy();
      return;
    }
    if (up.statusCode === 101) {
      // A 101 without `Upgrade` reaches here as a response: the same refusal, never passed on.
      up.destroy();
      this.proxyReq?.destroy();
      return this.refuseSwitch();
    }
    const upstreamMs = performance.now() - this.sentAt;
    const status = up.statusCode ?? 502;
    this.status = status;
    this.upstreamMs = upstreamMs;
    if (res.destroyed) {
      up.destroy();
      return;
    }
    if (this.intercept?.(up)) {
      up.resume();
      this.finish('intercepted', status, upstreamMs);
      return;
    }
    const headers = filterResponseHeaders(up.rawHeaders);
    const extra = this.extraHeaders;
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
    res.writeHead(status, up.statusMessage, headers);
    const ct = up.headers['content-type'];
    if (ct?.startsWith('text/event-stream')) {
      // Send headers now: a reasoning model may think for minutes before its first event.
      res.flushHeaders();
      if (this.ctx.openStreams !== undefined) {
        this.streaming = true;
        this.ctx.openStreams.inc();
      }
    }
    // A relay that dies mid-body must end the client's stream visibly, not leave it hanging.
    up.on('close', () => {
      if (up.complete) return;
      res.destroy();
      this.finish('upstream_aborted', this.status, this.upstreamMs);
    });
    res.on('finish', () => this.finish('admitted', this.status, this.upstreamMs));
    up.pipe(res);
  }

  /** The relay request failed (http-proxy's 'error' event). */
  failed(err: Error): void {
    if (this.finished) return;
    const res = this.res;
    if (res.headersSent) {
      res.destroy();
      this.finish('upstream_aborted', this.status, this.upstreamMs, err);
      return;
    }
    // (req.destroyed says nothing here: a fully read request is destroyed once consumed.)
    if (res.destroyed || res.writableEnded) {
      this.finish('client_aborted', null, null, err);
      return;
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EMFILE' || code === 'ENFILE') {
      // The relay is not at fault: sluice has no descriptor left to reach it with.
      sendRefusal(res, Refusals.OUT_OF_SOCKETS, this.requestId);
      this.finish('out_of_sockets', Refusals.OUT_OF_SOCKETS.status, null, err);
      this.ctx.onOutOfSockets?.(err);
      return;
    }
    // Never replay: a POST the relay may have started is answered 502, not retried.
    sendRefusal(res, Refusals.UPSTREAM_UNREACHABLE, this.requestId);
    this.finish('upstream_error', Refusals.UPSTREAM_UNREACHABLE.status, null, err);
  }

  /** The relay's headers did not come within `limitMs`: 504, and the relay request aborted. */
  timedOut(limitMs: number): void {
    if (this.finished) return;
    sendRefusal(this.res, Refusals.UPSTREAM_TIMEOUT, this.requestId, { params: { seconds: limitMs / 1000 } });
    this.finish('upstream_timeout', Refusals.UPSTREAM_TIMEOUT.status, null);
    // Its error (socket hang up) then finds the exchange finished and answers nothing more.
    this.proxyReq?.destroy();
  }

  /**
   * The relay switched protocols though sluice asked for no switch (it strips `Upgrade`): Node's
   * client then emits neither a response nor an error, only 'upgrade' to a listener (without one it
   * closes the socket in silence), and the client would wait out upstream.headersTimeoutSeconds.
   * Answered 502 at once instead, and the connection closed: what follows on it is no HTTP.
   */
  private refuseSwitch(): void {
    if (this.finished) return;
    const err = new Error(SWITCHED);
    if (this.res.destroyed || this.res.writableEnded) return this.finish('client_aborted', null, null, err);
    sendRefusal(this.res, Refusals.UPSTREAM_UNREACHABLE, this.requestId);
    this.finish('upstream_error', Refusals.UPSTREAM_UNREACHABLE.status, performance.now() - this.sentAt, err);
  }

  finish(outcome: ForwardResult['outcome'], status: number | null, upstreamMs: number | null, error?: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.ctx.waiting.delete(this);
    if (this.streaming) this.ctx.openStreams!.dec();
    if (this.done) this.done(error === undefined ? { outcome, status, upstreamMs } : { outcome, status, upstreamMs, error });
  }
}

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

/** How often exchanges waiting for the relay's headers are checked against their bound. */
const SWEEP_MS = 1000;

export class Forwarder {
  private readonly proxy: httpProxy;
  readonly agent: http.Agent;
  private readonly target: Partial<Url>;
  private readonly ctx: ForwarderContext;
  private readonly exchanges = new WeakMap<IncomingMessage, Exchange>();
  /** Sweeps the exchanges waiting for the relay's headers (ForwarderContext.waiting says why one interval). */
  private sweeper: NodeJS.Timeout | null = null;

  constructor(opts: ForwarderOptions) {
    this.ctx = new ForwarderContext(opts.openStreams, opts.onOutOfSockets);
    this.setHeadersTimeout(opts.headersTimeoutSeconds ?? 0);
    this.agent = createUpstreamAgent(opts.upstream, opts);
    this.target = targetOf(opts.upstream);
    this.proxy = httpProxy.createProxyServer({
      agent: this.agent,
      selfHandleResponse: true,
      xfwd: false,
      changeOrigin: true,
      ws: false,
    });
    // http-proxy's events name the client's request; the exchange is found from it.
    this.proxy.on('proxyReq', (proxyReq, req) => this.exchanges.get(req)?.sent(proxyReq));
    this.proxy.on('proxyRes', (up, req) => {
      const exchange = this.exchanges.get(req);
      if (exchange === undefined) up.destroy();
      else exchange.answered(up);
    });
    this.proxy.on('error', (err, req) => this.exchanges.get(req)?.failed(err));
  }

  forward(job: ForwardJob): void {
    const exchange = new Exchange(job, this.ctx);
    this.exchanges.set(job.req, exchange);
    if (this.ctx.headersTimeoutMs > 0) this.ctx.waiting.add(exchange);
    this.turn.add(exchange);
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
  private readonly turn = new TurnBatch<Exchange>((turn) => {
    for (const exchange of turn) {
      const body = exchange.body;
      exchange.body = null;
      // The client left before the turn ended: nothing goes to the relay (its 'close' finishes the exchange).
      if (exchange.finished || exchange.res.destroyed) {
        exchange.lease?.release();
        exchange.lease = null;
      } else {
        this.proxy.web(exchange.req, exchange.res, { target: this.target, buffer: bodyStream(body) });
      }
    }
  });

  /** Sets the bound on the wait for the relay's response headers (0: none); a reload may change it. */
  setHeadersTimeout(seconds: number): void {
    this.ctx.headersTimeoutMs = seconds * 1000;
    if (seconds > 0 && this.sweeper === null) {
      this.sweeper = setInterval(() => this.ctx.sweep(performance.now()), SWEEP_MS);
      this.sweeper.unref();
    } else if (seconds <= 0 && this.sweeper !== null) {
      clearInterval(this.sweeper);
      this.sweeper = null;
      this.ctx.waiting.clear();
    }
  }

  close(): void {
    if (this.sweeper !== null) clearInterval(this.sweeper);
    this.sweeper = null;
    this.agent.destroy();
    this.proxy.close();
  }
}
