/**
 * The forwarding engine: http-proxy behind one module so it stays swappable.
 * It owns the http-proxy defects a sidecar must handle (FIELD-NOTES):
 * keep-alive agent, re-sent bodies, error listener, aborts in both directions,
 * hop-by-hop stripping, and SSE passing through unbuffered and uncompressed.
 */
import http, { type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import httpProxy from 'http-proxy';
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
}

export interface ForwarderOptions {
  upstream: URL;
  /** Idle keep-alive sockets are closed after this long; keep it below the relay's own idle timeout. */
  keepAliveIdleMs?: number;
  maxFreeSockets?: number;
}

const JOB = Symbol('sluice.forwardJob');

interface JobState extends ForwardJob {
  proxyReq: ClientRequest | null;
  sentAt: number;
  finished: boolean;
  result: ForwardResult | null;
}

type WithJob = IncomingMessage & { [JOB]?: JobState };

export class Forwarder {
  private readonly proxy: httpProxy;
  readonly agent: http.Agent;
  private readonly target: { protocol: string; host: string; port: string; path: string };

  constructor(opts: ForwarderOptions) {
    const u = opts.upstream;
    const secure = u.protocol === 'https:';
    const agentOpts: http.AgentOptions = {
      keepAlive: true,
      keepAliveMsecs: 1000,
      timeout: opts.keepAliveIdleMs ?? 4000,
      maxFreeSockets: opts.maxFreeSockets ?? 256,
      scheduling: 'lifo',
      noDelay: true,
    } as http.AgentOptions;
    this.agent = secure ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
    this.target = {
      protocol: u.protocol,
      host: u.hostname,
      port: u.port || (secure ? '443' : '80'),
      // http-proxy joins this with the request path.
      path: u.pathname === '/' ? '' : u.pathname.replace(/\/$/, ''),
    };
    this.proxy = httpProxy.createProxyServer({
      agent: this.agent,
      selfHandleResponse: true,
      xfwd: false,
      changeOrigin: true,
      ws: false,
    });
    this.proxy.on('proxyReq', (proxyReq, req) => {
      const job = (req as WithJob)[JOB];
      if (job) job.proxyReq = proxyReq;
    });
    this.proxy.on('proxyRes', (proxyRes, req, res) => this.onResponse(proxyRes, req as WithJob, res as ServerResponse));
    this.proxy.on('error', (err, req, res) => this.onError(err, req as WithJob, res as ServerResponse));
  }

  forward(job: ForwardJob): void {
    const state: JobState = { ...job, proxyReq: null, sentAt: performance.now(), finished: false, result: null };
    const req = job.req as WithJob;
    req[JOB] = state;
    const { res } = job;
    // A client that leaves stops the relay's work: http-proxy 1.18.1 would let it run on.
    res.once('close', () => {
      if (!res.writableFinished) {
        state.proxyReq?.destroy();
        this.finish(state, { outcome: 'client-aborted', status: state.result?.status ?? null, upstreamMs: state.result?.upstreamMs ?? null });
      }
    });
    this.proxy.web(req, res, {
      target: this.target as unknown as httpProxy.ProxyTargetUrl,
      buffer: job.body ? Readable.from([job.body]) : Readable.from([]),
    } as httpProxy.ServerOptions);
  }

  private onResponse(up: IncomingMessage, req: WithJob, res: ServerResponse): void {
    const state = req[JOB];
    if (!state) {
      up.destroy();
      return;
    }
    const upstreamMs = performance.now() - state.sentAt;
    const status = up.statusCode ?? 502;
    state.result = { outcome: 'completed', status, upstreamMs };
    if (res.destroyed) {
      up.destroy();
      return;
    }
    if (state.intercept?.(up)) {
      up.resume();
      this.finish(state, { outcome: 'intercepted', status, upstreamMs });
      return;
    }
    res.writeHead(status, up.statusMessage, filterResponseHeaders(up.rawHeaders));
    const ct = up.headers['content-type'];
    if (ct !== undefined && ct.startsWith('text/event-stream')) {
      // Send headers now: a reasoning model may think for minutes before its first event.
      res.flushHeaders();
    }
    // A relay that dies mid-body must end the client's stream visibly, not leave it hanging.
    up.once('close', () => {
      if (!up.complete) {
        res.destroy();
        this.finish(state, { outcome: 'upstream-aborted', status, upstreamMs });
      }
    });
    up.once('end', () => {
      res.end();
    });
    up.on('data', (chunk: Buffer) => {
      if (!res.write(chunk)) {
        up.pause();
        res.once('drain', () => up.resume());
      }
    });
    res.once('finish', () => this.finish(state, { outcome: 'completed', status, upstreamMs }));
  }

  private onError(err: Error, req: WithJob, res: ServerResponse): void {
    const state = req[JOB];
    if (!state || state.finished) return;
    if (res.headersSent) {
      res.destroy();
      this.finish(state, { outcome: 'upstream-aborted', status: state.result?.status ?? null, upstreamMs: state.result?.upstreamMs ?? null, error: err });
      return;
    }
    // (req.destroyed says nothing here: a fully read request is destroyed once consumed.)
    if (res.destroyed || res.writableEnded) {
      this.finish(state, { outcome: 'client-aborted', status: null, upstreamMs: null, error: err });
      return;
    }
    // Never replay: a POST the relay may have started is answered 502, not retried.
    sendError(res, Errors.UPSTREAM_UNREACHABLE, state.requestId);
    this.finish(state, { outcome: 'upstream-error', status: null, upstreamMs: null, error: err });
  }

  private finish(state: JobState, r: ForwardResult): void {
    if (state.finished) return;
    state.finished = true;
    state.done?.(r);
  }

  close(): void {
    this.agent.destroy();
    this.proxy.close();
  }
}
