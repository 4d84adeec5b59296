/**
 * The public request path, top to bottom: classify, limit by IP,
 * authenticate, read the model, limit the free tier, forward. Each stage is a
 * small function with its I/O behind the store, the clock and the relay.
 * Nothing a client sends may throw past `handle`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BlockList } from 'node:net';
import type { Logger } from 'pino';
import type { Authenticator } from './auth/authenticator.js';
import { credentialRules, presentedKeys } from './auth/credentials.js';
import { keyBody } from './auth/keys.js';
import { hasBody, readBody } from './body.js';
import { resolveClientIp } from './client-ip.js';
import type { Clock } from './clock.js';
import { Errors, sendError, type ErrorSpec } from './errors.js';
import { prepareRequestHeaders } from './forward/headers.js';
import type { ForwardResult, Forwarder } from './forward/proxy.js';
import type { FreeTierLimiter } from './limits/free-tier.js';
import type { IpLimiter } from './limits/ip.js';
import { requestedModel } from './model/index.js';
import { newRequestId } from './request-id.js';
import { parseTarget } from './target.js';

export interface GatewayDeps {
  clock: Clock;
  log: Logger;
  authenticator: Authenticator;
  freeTier: FreeTierLimiter;
  ipLimiter: IpLimiter;
  forwarder: Forwarder;
  trustedProxies: BlockList | null;
  maxBodyBytes: number;
  /** Replaces the client's key toward the relay when set. */
  upstreamCredential: string | null;
}

export type Decision =
  | 'admitted'
  | 'unauthorized'
  | 'ip_limited'
  | 'free_tier_minute'
  | 'free_tier_day'
  | 'free_tier_upstream'
  | 'too_large'
  | 'bad_request'
  | 'store_unavailable'
  | 'upstream_error'
  | 'client_aborted'
  | 'internal_error';

/** What one request did; logged as one line. */
interface Trace {
  id: string;
  start: number;
  method: string;
  path: string;
  ip: string;
  user?: string;
  model?: string | null;
  freeTier?: boolean;
  decision?: Decision;
  status?: number;
  upstreamMs?: number | null;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

export function createGateway(d: GatewayDeps): RequestHandler {
  const { log } = d;

  function reject(res: ServerResponse, t: Trace, decision: Decision, err: ErrorSpec, opts: Parameters<typeof sendError>[3] = {}): void {
    t.decision = decision;
    t.status = err.status;
    sendError(res, err, t.id, opts);
    done(t);
  }

  function done(t: Trace): void {
    log.info(
      {
        reqId: t.id,
        method: t.method,
        path: t.path,
        ip: t.ip,
        user: t.user,
        model: t.model ?? undefined,
        freeTier: t.freeTier,
        decision: t.decision,
        status: t.status,
        upstreamMs: t.upstreamMs === undefined || t.upstreamMs === null ? undefined : Math.round(t.upstreamMs * 100) / 100,
        ms: Math.round((performance.now() - t.start) * 100) / 100,
      },
      'request',
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t: Trace = {
      id: newRequestId(d.clock.now()),
      start: performance.now(),
      method: req.method ?? 'GET',
      path: '',
      ip: resolveClientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], d.trustedProxies),
    };

    // 1. Classify.
    const target = parseTarget(req.url);
    if (!target) return reject(res, t, 'bad_request', Errors.BAD_REQUEST, { params: { reason: 'malformed request path' }, close: true });
    t.path = target.path;

    // 2. Per-IP limits, before authentication: every request counts.
    const rule = d.ipLimiter.match(target.path);
    if (rule) {
      const v = await d.ipLimiter.admit(rule, t.ip);
      if (!v.admitted) {
        return reject(res, t, 'ip_limited', Errors.IP_RATE_LIMITED, { headers: { 'retry-after': String(v.retryAfterSeconds) } });
      }
    }

    // 3. Authenticate.
    const auth = await d.authenticator.authenticate(presentedKeys(req.headers, credentialRules(target.path)));
    if (!auth.ok) {
      if (auth.reason === 'unavailable') {
        log.warn({ reqId: t.id, err: String(auth.error) }, 'key store unreachable; cannot judge an unseen key');
        return reject(res, t, 'store_unavailable', Errors.STORE_UNAVAILABLE, { headers: { 'retry-after': '1' } });
      }
      return reject(res, t, 'unauthorized', Errors.UNAUTHORIZED);
    }
    t.user = auth.identity.user;

    // 4. Read the body (bounded) and the model it asks for.
    let body: Buffer | null = null;
    if (hasBody(req)) {
      const r = await readBody(req, d.maxBodyBytes);
      if (!r.ok) {
        if (r.reason === 'too-large') {
          return reject(res, t, 'too_large', Errors.BODY_TOO_LARGE, { params: { limit: d.maxBodyBytes }, close: true });
        }
        t.decision = 'client_aborted';
        res.destroy();
        return done(t);
      }
      body = r.body;
    }
    const m = requestedModel(t.method, target.path, req.headers, body, d.maxBodyBytes);
    if (!m.ok) {
      const err = m.status === 413 ? Errors.BODY_TOO_LARGE : m.status === 415 ? Errors.UNSUPPORTED_ENCODING : Errors.BAD_REQUEST;
      return reject(res, t, m.status === 413 ? 'too_large' : 'bad_request', err, { params: { reason: m.reason, limit: d.maxBodyBytes } });
    }
    t.model = m.model;

    // 5. Free tier: one store round trip, only for free models.
    const free = m.model !== null && d.freeTier.isFree(m.model);
    t.freeTier = free;
    if (free) {
      const v = await d.freeTier.admit(auth.identity.user);
      if (!v.admitted) {
        const c = d.freeTier.config;
        const headers = { 'retry-after': String(v.retryAfterSeconds) };
        return v.reason === 'day'
          ? reject(res, t, 'free_tier_day', Errors.FREE_TIER_DAILY_EXHAUSTED, { headers, params: { limit: c.perDay, timeZone: c.timeZone } })
          : reject(res, t, 'free_tier_minute', Errors.FREE_TIER_RATE_LIMITED, {
              headers,
              params: { limit: c.perMinute, window: c.windowSeconds, retryAfter: v.retryAfterSeconds },
            });
      }
    }

    // 6. Forward.
    prepareRequestHeaders(req.headers, {
      authorization: `Bearer ${d.upstreamCredential ?? 'sk-' + keyBody(auth.key)}`,
      clientIp: t.ip,
      bodyLength: body === null ? null : body.length,
    });
    req.url = target.forwardUrl;
    d.forwarder.forward({
      req,
      res,
      body,
      requestId: t.id,
      // The relay's 429 on an admitted free call means its own upstream free tier is busy.
      intercept: free
        ? (up) => {
            if (up.statusCode !== 429) return false;
            t.decision = 'free_tier_upstream';
            t.status = 402;
            sendError(res, Errors.FREE_TIER_EXHAUSTED, t.id, { headers: { 'retry-after': '30' } });
            return true;
          }
        : undefined,
      done: (r: ForwardResult) => {
        t.upstreamMs = r.upstreamMs;
        if (r.outcome === 'intercepted') return done(t);
        t.status = r.status ?? (r.outcome === 'upstream-error' ? 502 : undefined);
        t.decision = r.outcome === 'client-aborted' ? 'client_aborted' : r.outcome === 'upstream-error' ? 'upstream_error' : 'admitted';
        if (r.error && r.outcome !== 'client-aborted') log.warn({ reqId: t.id, err: r.error.message }, 'relay request failed');
        done(t);
      },
    });
  }

  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      const storeDown = isStoreError(err);
      log.error({ err: err instanceof Error ? err.message : String(err), storeDown }, storeDown ? 'limit store unreachable' : 'request handler failed');
      const id = newRequestId(d.clock.now());
      if (storeDown) sendError(res, Errors.STORE_UNAVAILABLE, id, { headers: { 'retry-after': '1' } });
      else sendError(res, Errors.INTERNAL, id, { close: true });
    });
  };
}

/** Errors from the store (ioredis) as opposed to bugs. */
export function isStoreError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const n = err.name;
  return (
    n === 'ReplyError' ||
    n === 'MaxRetriesPerRequestError' ||
    n === 'AbortError' ||
    /Connection is closed|Stream isn't writeable|Command timed out|ECONNREFUSED|ECONNRESET|enableOfflineQueue|NOSCRIPT|LOADING|READONLY|CLUSTERDOWN/i.test(err.message)
  );
}
