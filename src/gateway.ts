/**
 * The public request path, top to bottom: classify, limit by IP,
 * authenticate, read the model, limit the free tier, forward. Each stage is a
 * small function with its I/O behind the store, the clock and the relay.
 * Nothing a client sends may throw past `handle`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { boundLogged, createAccessLog, loggedModel, redactPath, wantsAccessLine, type AccessRecord } from './log/access.js';
import { REGISTRY_SOURCE, type Authenticator } from './auth/authenticator.js';
import { headerReason, presentedKeys } from './auth/credentials.js';
import { keyBody } from './auth/keys.js';
import { isLookupRefusal } from './auth/lookup-guard.js';
import type { BodyBudget, BodyLease } from './http/body-budget.js';
import { announcesBytes, declaredLength, dropRest, hasBody, readBody } from './http/body.js';
import { addressBucket } from './http/address-bucket.js';
import { resolveClientIp } from './http/client-ip.js';
import { FREE_TIER_LIMIT, ipRuleLimit } from './limits/names.js';
import type { Clock } from './runtime/clock.js';
import { BodyBudgetExceededError } from './http/body-budget.js';
import { StoreUnavailableError } from './store/unavailable.js';
import { Refusals, sendRefusal, type Refusal, type RefusalArgs } from './answers/refusals.js';
import { connectionNamesJudgedField, prepareRequestHeaders } from './forward/headers.js';
import type { ForwardResult, Forwarder } from './forward/proxy.js';
import type { Metrics } from './metrics/index.js';
import { RELAY_DB_SOURCE } from './auth/relay-db/source.js';
import { modelPrepass, requestedModel, type ModelPrepass } from './model/index.js';
import type { Outcome } from './answers/outcome.js';
import type { Policy } from './limits/policy.js';
import { newRequestId } from './http/request-id.js';
import { answerOnConnection, closedOnConnection, closesWithConnection, MAX_PIPELINED_REQUESTS, pipelinedTooDeep, relayTurn } from './http/pipelining.js';
import { planFor, routeOf, type RouteFamily } from './routing/routes.js';
import { invalidTargetReason, parseTarget } from './routing/target.js';
import { atTurnEnd } from './runtime/turn-batch.js';
import { UpgradeResponse } from './http/upgrade.js';

export interface GatewayDeps {
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  authenticator: Authenticator;
  forwarder: Forwarder;
  /** The current policy; swapped atomically on config reload. */
  policy: () => Policy;
  /** True once draining began: answers carry `connection: close`. */
  draining: () => boolean;
  /** True once the drain's bound passed: a request that ends as a client abort from then on was cut by sluice (`drain_deadline`). */
  cutting: () => boolean;
  /** The memory budget every request body in flight is counted in. */
  budget: BodyBudget;
}

/** What one request did; logged as one line (the access record) and counted once. */
interface Trace extends AccessRecord {
  family: RouteFamily;
  decision?: Outcome;
  logged?: boolean;
  /** sluice's own answers carry the relay's CORS headers (a cross-origin call on a route where the relay adds them). */
  cors?: boolean;
  /** The client sent `Expect: 100-continue`: it waits for sluice's invitation before sending the body. */
  expectsContinue: boolean;
  /** A POST on no route sluice knows of the relay (routes.ts: `unrouted`): no model read, nothing counted. */
  unrouted?: boolean;
  /** Its response closed, or its connection died with it queued: what it held is released. */
  closed?: boolean;
  /** What its body holds of the bodies' budget; released when the response closes, if not before. */
  lease: BodyLease | null;
  /** A WebSocket upgrade (src/http/upgrade.ts), answered on an UpgradeResponse until the relay switches. */
  webSocket: boolean;
}

type Intercept = (upstream: IncomingMessage) => boolean;

/** A relay answer that `matches` is replaced by one of sluice's refusals. */
function replaceAnswer<P>(res: ServerResponse, t: Trace, matches: Intercept, r: Refusal<Outcome, P>, ...[opts]: RefusalArgs<P>): Intercept {
  return (up) => {
    if (!matches(up)) return false;
    t.decision = r.outcome;
    t.status = r.status;
    sendRefusal(res, r, t.id, ...([{ ...opts, cors: t.cors ? CORS_NORMAL : undefined }] as RefusalArgs<P>));
    return true;
  };
}

/**
 * The relay's CORS middleware (new-api middleware/cors.go: gin-contrib/cors allowing every origin,
 * with credentials, the methods GET, POST, PUT, DELETE and OPTIONS and every header, preflights
 * cached 12 hours) adds the first two to its answers to a cross-origin call; sluice adds them to its
 * own answers on the same routes, so a browser client can read a 401 or a 429 as it could the
 * relay's. A page reads only the fields an answer exposes, and the relay exposes none: sluice's own
 * answers name the fields that tell a client when to retry (contract §7: "wait that long, then
 * retry") and the request id its 401 quotes.
 */
const CORS_NORMAL: Readonly<Record<string, string>> = Object.freeze({
  'access-control-allow-credentials': 'true',
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'Retry-After, RateLimit, RateLimit-Policy, X-Oneapi-Request-Id',
});

/**
 * A CORS preflight as browsers send it: OPTIONS with an Origin and the method the real call will
 * use, and no body. It carries no key, and the relay answers it (204 with its CORS headers) before
 * any authentication, on every path: sluice forwards it without a key and without counting it
 * against the free tier (the per-IP limits have already applied). Any other OPTIONS is an ordinary
 * call that needs a key (the relay answers it by its route: 204 with an Origin, else 404).
 */
function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && !!req.headers.origin && !!req.headers['access-control-request-method'] && !announcesBytes(req);
}

/**
 * Whether a call is cross-origin as the relay's CORS middleware judges it: an Origin that is not
 * `http://` or `https://` and the Host the client addressed.
 */
function crossOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (!origin) return false;
  const host = req.headers.host;
  return origin !== `http://${host}` && origin !== `https://${host}`;
}

const isRelay429: Intercept = (up) => up.statusCode === 429;

/**
 * The relay's own per-address limiters (new-api's critical and search limits) answer 429 with
 * neither Retry-After nor body; the contract promises Retry-After on every 429 of the query
 * endpoints. Only that bare form is replaced: a 429 with a body (new-api's e-mail verification
 * limit says how long to wait) passes as it is.
 */
const isBareRelayLimit: Intercept = (up) => up.statusCode === 429 && up.headers['retry-after'] === undefined && up.headers['content-length'] === '0';

/** The query endpoints of contract §7/§8, whose every 429 carries Retry-After and no body. */
const QUERY_FAMILIES: ReadonlySet<RouteFamily> = new Set(['usage_query', 'api', 'dashboard']);

/**
 * A refused request's body this small, still arriving, is read and dropped instead of closing the
 * connection (answers/refusals.ts closes a connection answered before its body): a client refused again and
 * again (a wrong key, an address over its limit) would otherwise pay a new connection per request,
 * and sluice with it. A larger body, or one a client waits to be invited to send, still closes, and
 * so does one whose rest is not in within `server.headersTimeoutSeconds`: a refused client holds a
 * connection no longer than one that never finishes its headers.
 */
const SMALL_UNREAD_BODY_BYTES = 64 * 1024;
/** Paths of unrouted POSTs the relay answered with a success that are logged: the first ones are enough to act on. */
const UNROUTED_PATHS_SAID = 100;

/** Whether an answer given before the body may keep the connection: a keep-alive client, a small declared body not yet read, not waiting for `100 Continue`. */
function keepsConnection(res: ServerResponse, t: Trace): boolean {
  const req = res.req;
  if (!res.shouldKeepAlive || t.expectsContinue || req.complete || req.destroyed || req.headers['transfer-encoding'] !== undefined) return false;
  const length = declaredLength(req);
  return length > 0 && length <= SMALL_UNREAD_BODY_BYTES;
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface Gateway extends RequestHandler {
  /**
   * For the server's 'checkContinue' event: the same path, but the client waits for `100 Continue`
   * before sending its body, and gets it only once its key, its address's limit, the body's
   * declared size and the bodies' budget have all let it through.
   */
  checkContinue: RequestHandler;
  /**
   * The server's request timeout fired while this response's request was still arriving: answers
   * 408 in the relay's JSON shape and closes the connection. False when there is nothing left to
   * answer (already answered, or not a gateway request).
   */
  requestTimedOut(res: ServerResponse, seconds: number): boolean;
  /**
   * For the server's 'upgrade' event (a WebSocket upgrade, src/http/upgrade.ts): the same path on a
   * response made on its socket; admitted, the connection is joined to the relay's once it switches.
   */
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void;
  /**
   * Closes every WebSocket upgrade not switched yet (a drain's deadline, closing): Node's server no
   * longer holds their connections. Each ends as a client that left (`client_aborted`, which a
   * drain's deadline makes `drain_deadline`). Switched sessions are the forwarder's (cutTunnels).
   */
  cutUpgrades(): void;
}

export function createGateway(d: GatewayDeps): Gateway {
  const { log, metrics } = d;
  const accessLog = createAccessLog(log);
  /** Each response's trace, for the server's request timeout, which finds the response alone. */
  const traces = new WeakMap<ServerResponse, Trace>();
  /** Paths of unrouted POSTs the relay answered, said once each. */
  const unroutedSaid = new Set<string>();
  /** WebSocket upgrades not switched yet, or refused and not yet closed: cutUpgrades closes them. */
  const upgrading = new Set<ServerResponse>();

  function decided(t: Trace): void {
    t.decidedMs = performance.now() - t.start;
    metrics.observeDecision(t.family, t.decidedMs / 1000);
  }

  /** Answers with one of sluice's refusals (src/answers/refusals.ts), and logs and counts the request. */
  function refuse<P>(res: ServerResponse, t: Trace, r: Refusal<Outcome, P>, ...[opts]: RefusalArgs<P>): void {
    decided(t);
    t.decision = r.outcome;
    t.status = r.status;
    let dropsRest = opts?.dropsRest === true;
    if (!r.close && !dropsRest && keepsConnection(res, t)) {
      dropRest(res.req, SMALL_UNREAD_BODY_BYTES, d.policy().config.server.headersTimeoutSeconds * 1000);
      dropsRest = true;
    }
    sendRefusal(res, r, t.id, ...([{ ...opts, dropsRest, cors: t.cors ? CORS_NORMAL : undefined }] as RefusalArgs<P>));
    done(t);
  }

  /**
   * 503 for a body the budget cannot hold. The rest of a body the client is sending anyway is read
   * and dropped (held by nothing, at most maxBodyBytes), so that the client reads the answer
   * instead of a reset; the request timeout still bounds a client that sends slowly. A client
   * waiting for `100 Continue` sends nothing: its connection is simply closed.
   *
   * On a connection that closes after this answer (the client sent `Connection: close`, or spoke
   * HTTP/1.0), Node closes the socket as soon as the answer is written, with the rest of the body
   * still arriving: the kernel resets the connection, and a client still writing its body sees
   * EPIPE or ECONNRESET instead of the answer. There the answer waits until the rest has been read.
   */
  function refuseBusy(res: ServerResponse, t: Trace, req: IncomingMessage): void {
    // Which bound refused: the whole budget, or the share of the client's address bucket.
    const bound = d.budget.tighterBound(addressBucket(t.ip, d.policy().config.ipv6Prefix));
    metrics.bodyBudgetRefusals.inc({ bound });
    t.reason = bound;
    const dropsRest = !t.expectsContinue && !req.complete && !req.destroyed;
    const answer = (): void => {
      // The request timeout may have answered (408) while the rest was arriving.
      if (t.logged || res.headersSent || res.destroyed) return;
      refuse(res, t, Refusals.BUSY, { dropsRest });
    };
    if (!dropsRest) return answer();
    dropRest(req, d.policy().config.maxBodyBytes);
    if (res.shouldKeepAlive) answer();
    else req.once('end', answer);
  }

  function done(t: Trace): void {
    if (t.logged) return;
    t.logged = true;
    let decision = t.decision ?? 'internal_error';
    // The drain deadline closed its connection: sluice cut it, the client did not leave.
    if (decision === 'client_aborted' && d.cutting()) decision = t.decision = 'drain_deadline';
    metrics.countRequest(t.family, decision);
    if (wantsAccessLine(d.policy().config.accessLog, decision, t.status)) accessLog(t, decision);
  }

  // A limiter answers a refused subject's retry from memory while the store could only repeat
  // itself (limits.rememberRefusalsSeconds): counted so operators see it. The answer leaves at the
  // end of the turn, with the others of the turn (src/runtime/turn-batch.ts).
  async function remembered(limit: string): Promise<void> {
    metrics.rememberedRefusals.inc({ limit });
    await atTurnEnd();
  }

  function shadowReject(t: Trace, limit: string, reason: string): void {
    metrics.shadowRejections.inc({ limit, reason });
    t.shadow = `${limit}:${reason}`;
    log.warn({ reqId: t.id, limit, reason, user: t.user, ip: t.ip }, 'shadow limit would have rejected this call');
  }

  async function handle(req: IncomingMessage, res: ServerResponse, t: Trace): Promise<void> {
    const p = d.policy();
    t.ip = resolveClientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], p.trustedProxies);

    // 1. Classify.
    const target = parseTarget(req.url);
    if (!target) return refuse(res, t, Refusals.BAD_PATH, { params: { reason: invalidTargetReason(req.url) } });
    t.path = target.path;
    const route = routeOf(target.path);
    t.family = route.family;
    // Sent as `/v1…`: the relay's NoRoute answers JSON 404 by the raw target's prefix, and its
    // console page (a 200) to anything else, such as `/%761/x`.
    t.unrouted = route.unrouted && t.method === 'POST' && target.forwardUrl.startsWith('/v1');
    if (route.cors && req.headers.origin !== undefined) t.cors = crossOrigin(req);
    // A field sluice judges by, declared hop-by-hop, would not reach the relay: the request it
    // reads would not be the one judged. Refused here, by its headers alone, before it counts
    // against any limit or asks the key store anything, as a path read two ways is.
    const stripped = connectionNamesJudgedField(req.headers.connection);
    if (stripped !== null) {
      return refuse(res, t, Refusals.BAD_REQUEST, {
        params: { reason: `the Connection header names ${stripped}, which sluice reads or rewrites; forwarded, it would be removed before the relay saw it` },
      });
    }

    // 2. Per-IP limits, before authentication: every request counts.
    const rule = p.ipLimiter.match(target.path);
    if (rule) {
      const v = await p.ipLimiter.admit(rule, t.ip);
      // A client that left while the store decided has had its line: nothing more for it.
      if (res.destroyed) return;
      if (!v.admitted) {
        if (v.remembered) await remembered(ipRuleLimit(rule.name));
        if (rule.shadow) shadowReject(t, ipRuleLimit(rule.name), 'window');
        else return refuse(res, t, Refusals.IP_LIMITED, { params: { retryAfter: v.retryAfterSeconds } });
      }
    }

    // A CORS preflight goes to the relay as it is, without a key.
    if (isPreflight(req)) {
      decided(t);
      prepareRequestHeaders(req.headers, { key: null, clientIp: t.ip, bodyLength: null });
      req.url = target.forwardUrl;
      return forward(req, res, t, null);
    }

    // 3. Authenticate.
    const presented = presentedKeys(req.headers, route, req.rawHeaders, t.webSocket);
    // Failures count per address bucket, as the per-IP limits do: an IPv6 client's whole /64 is one
    // (and so does its share of the bodies' budget, below).
    const bucket = addressBucket(t.ip, p.config.ipv6Prefix);
    const auth = await d.authenticator.authenticate(presented, bucket, res);
    if (!auth.ok) {
      // It left while it waited for its address's key lookups, and has had its line.
      if (auth.reason === 'client_gone') return;
      if (auth.reason === 'unavailable') {
        t.reason = 'lookup_failed';
        log.warn({ reqId: t.id, source: auth.source, err: String(auth.error) }, 'key source unreachable and the key was not seen recently: cannot judge it');
        // The client gets the same 503 either way; operators see which outage it was.
        return refuse(res, t, auth.source === RELAY_DB_SOURCE ? Refusals.RELAY_DB_UNAVAILABLE : Refusals.STORE_UNAVAILABLE);
      }
      // A key the replica does not know, refused without a lookup (src/auth/lookup-guard.ts): the
      // client address spent its failures (401), or the replica is at its ceiling or its queue of
      // waiters is full (503: the key may be a valid new one). A counter says which.
      if (isLookupRefusal(auth.reason)) metrics.keyLookupsRefused.inc({ reason: auth.reason });
      // Why, and whose key when a key source holds it, for the access line only: the client gets
      // the contract's one 401 (src/auth/reasons.ts).
      t.reason = auth.reason === 'no_key' || auth.reason === 'empty_key' ? headerReason(req.headers, route, req.rawHeaders, auth.reason) : auth.reason;
      if ('keyId' in auth) {
        t.keyId = auth.keyId;
        t.user = auth.user;
      }
      // A key judged from memory: the answer leaves with the turn's other answers (src/runtime/turn-batch.ts).
      if (auth.remembered) await atTurnEnd();
      if (res.destroyed) return;
      if (auth.reason === 'lookup_ceiling' || auth.reason === 'lookup_queue_full') {
        const refusal = auth.reason === 'lookup_ceiling' ? Refusals.LOOKUP_CEILING : Refusals.LOOKUP_QUEUE_FULL;
        return refuse(res, t, refusal, { params: { retryAfter: auth.retryAfterSeconds } });
      }
      return refuse(res, t, Refusals.UNAUTHORIZED);
    }
    t.user = auth.identity.user;
    t.keyId = auth.identity.id;

    // 4. Read the body (bounded, and counted in the bodies' memory budget) and the model it asks for.
    const max = p.config.maxBodyBytes;
    let body: Buffer | null = null;
    let prepass: ModelPrepass | null = null;
    if (hasBody(req)) {
      // The declared size is judged before the body is read, and before a client that asked for it is invited to send it.
      const declared = declaredLength(req);
      if (declared > max) return refuse(res, t, Refusals.BODY_TOO_LARGE, { params: { limit: max } });
      if (declared > d.budget.freeFor(bucket)) return refuseBusy(res, t, req);
      if (t.expectsContinue) {
        res.writeContinue();
        t.expectsContinue = false;
      }
      const lease = (t.lease = d.budget.lease(bucket));
      // Large JSON bodies are read into structure hints as they arrive, not scanned whole at the end.
      prepass = modelPrepass(t.method, target.path, req.headers, route);
      const r = await readBody(req, max, prepass, lease);
      if (!r.ok) {
        if (r.reason === 'too_large') return refuse(res, t, Refusals.BODY_TOO_LARGE, { params: { limit: max } });
        if (r.reason === 'busy') return refuseBusy(res, t, req);
        if (t.logged) return; // answered 408 when the request timeout cut it
        t.decision = r.reason;
        res.destroy();
        return done(t);
      }
      body = r.body;
    }
    const maxDecoded = p.config.maxDecodedBodyBytes;
    const m = await requestedModel(t.method, target.path, req.headers, body, maxDecoded, prepass, t.lease, route, target.query);
    // A client that left while sluice waited on it (key lookup, body, decoding) has had its log
    // line; the free tier counts nothing for it and nothing is forwarded.
    if (res.destroyed) return;
    if (!m.ok) {
      // Too large here is a compressed body that decodes past maxDecodedBodyBytes (the raw size was judged above).
      if (m.problem === 'too_large') return refuse(res, t, Refusals.DECODED_BODY_TOO_LARGE, { params: { limit: maxDecoded } });
      return refuse(res, t, m.problem === 'unsupported_encoding' ? Refusals.UNSUPPORTED_ENCODING : Refusals.BAD_REQUEST, { params: { reason: m.reason } });
    }
    // 5. Free tier: one store round trip, only for free models, and calls pinned to a free channel
    // whatever they name. The model is compared whole; the trace keeps only what the access line
    // logs of it (a model longer than any real one is never free). A key from the relay's database
    // is the relay's own token: it reaches the relay as the client sent it, so the relay bills and
    // logs the call to it. upstream.credential stands in only for keys of sluice's registry, which
    // the relay does not know.
    const registry = auth.identity.source === REGISTRY_SOURCE;
    const relayKey = registry ? (p.config.upstream.credential ?? 'sk-' + keyBody(auth.key)) : auth.key;
    // A pin takes effect where the relay's distributor picks a channel: the routes it reads a model on.
    const free = (m.model !== null && p.freeTier.isFree(m.model)) || (planFor(route, t.method).kind !== 'none' && p.freeTier.pinsFreeChannel(relayKey));
    // Judged whole for a key in its place, then bounded.
    t.model = m.model === null ? null : loggedModel(m.model);
    t.freeTier = free;
    // The RateLimit fields of this free call's answer (none in shadow mode); the relay's own, if it sends any, win.
    let rateLimit: Record<string, string> | undefined;
    if (free) {
      const v = await p.freeTier.admit(auth.identity.user);
      const shadow = p.config.freeTier.shadow;
      // Counted as decided, as the store counted it: a client that leaves now has spent the call.
      if (v.admitted || shadow) metrics.freeTierAdmissions.inc();
      if (!v.admitted && v.remembered) await remembered(FREE_TIER_LIMIT);
      if (res.destroyed) return;
      if (!shadow) {
        const fields = p.freeTier.rateLimitFields(v);
        rateLimit = { 'ratelimit-policy': fields.policy, ratelimit: fields.state };
      }
      if (!v.admitted) {
        if (shadow) {
          shadowReject(t, FREE_TIER_LIMIT, v.reason);
        } else {
          const c = p.config.freeTier;
          const retryAfter = v.retryAfterSeconds;
          return v.reason === 'day'
            ? refuse(res, t, Refusals.FREE_TIER_DAY, { params: { limit: c.perDay, timeZone: c.timeZone, retryAfter, rateLimit } })
            : refuse(res, t, Refusals.FREE_TIER_MINUTE, { params: { limit: c.perMinute, window: c.windowSeconds, retryAfter, rateLimit } });
        }
      }
    }

    // 6. Forward.
    decided(t);
    prepareRequestHeaders(req.headers, {
      key: relayKey,
      googKey: target.queryKey,
      clientIp: t.ip,
      bodyLength: body === null ? null : body.length,
      webSocket: t.webSocket,
    });
    req.url = target.forwardUrl;
    let intercept: Intercept | undefined;
    // The relay's 429 on an admitted free call means its own upstream free tier is busy.
    if (free) intercept = replaceAnswer(res, t, isRelay429, Refusals.FREE_TIER_UPSTREAM, { params: { rateLimit } });
    else if (rule && !rule.shadow && QUERY_FAMILIES.has(t.family)) {
      intercept = replaceAnswer(res, t, isBareRelayLimit, Refusals.RELAY_IP_LIMITED, { params: { retryAfter: rule.windowSeconds } });
    }
    forward(req, res, t, body, rateLimit, intercept);
  }

  function forward(req: IncomingMessage, res: ServerResponse, t: Trace, body: Buffer | null, extraHeaders?: Record<string, string>, intercept?: Intercept): void {
    // A request pipelined behind another on its connection waits for that one's answer. If the
    // connection dies meanwhile, its close has logged and released it, and the forwarder sends
    // nothing for a closed response.
    const turn = relayTurn(res);
    if (turn !== null) return void turn.then(() => forward(req, res, t, body, extraHeaders, intercept));
    d.forwarder.forward({
      req,
      res,
      body,
      lease: t.lease,
      requestId: t.id,
      extraHeaders,
      intercept,
      cors: t.cors ? CORS_NORMAL : undefined,
      // A WebSocket session open is a decided call: its line comes when it ends, whichever side ends it.
      switched: t.webSocket
        ? () => {
            t.decision = 'admitted';
            t.status = 101;
            upgrading.delete(res);
          }
        : undefined,
      done: (r: ForwardResult) => {
        t.upstreamMs = r.upstreamMs;
        if (r.upstreamMs !== null) metrics.observeRelay(t.family, r.upstreamMs / 1000);
        if (r.outcome === 'intercepted') return done(t);
        t.status = r.status ?? undefined;
        t.decision = r.outcome;
        if (t.unrouted && r.status !== null && r.status >= 200 && r.status < 300) unroutedAnswered(t);
        if (r.outcome === 'out_of_sockets')
          log.error({ reqId: t.id, err: r.error?.message }, 'sluice is out of sockets: no descriptor left to open a relay connection (see server.maxConnections)');
        else if (r.outcome === 'upstream_timeout')
          log.warn({ reqId: t.id, seconds: d.policy().config.upstream.headersTimeoutSeconds }, 'relay did not answer in time; its request was aborted');
        else if (r.outcome === 'answer_stalled') {
          t.reason = r.reason;
          log.warn(
            { reqId: t.id, reason: r.reason, seconds: d.policy().config.upstream.idleTimeoutSeconds },
            'answer cut: none of its bytes moved within upstream.idleTimeoutSeconds',
          );
        } else if (r.error && r.outcome !== 'client_aborted') log.warn({ reqId: t.id, err: r.error.message }, 'relay request failed');
        done(t);
      },
    });
  }

  /**
   * The relay answered a POST sluice knows no route for with a success: a newer relay serves a
   * route sluice reads no model on, so calls there are not counted against the free tier. Counted,
   * and said once per path (the first UNROUTED_PATHS_SAID), so that operators learn of it.
   */
  function unroutedAnswered(t: Trace): void {
    metrics.unroutedAnswers.inc();
    const path = redactPath(t.path);
    if (unroutedSaid.size >= UNROUTED_PATHS_SAID || unroutedSaid.has(path)) return;
    unroutedSaid.add(path);
    log.warn({ reqId: t.id, path: boundLogged(path), status: t.status }, 'the relay serves a POST route sluice does not know: calls there are not counted against the free tier');
  }

  function responseClosed(res: ServerResponse, t: Trace): void {
    if (t.closed) return;
    t.closed = true;
    closedOnConnection(res);
    metrics.inflight--;
    if (t.lease !== null) t.lease.release();
    // A client that left before any answer still gets its line.
    if (!t.logged && t.decision === undefined && !res.writableFinished) {
      t.decision = 'client_aborted';
      done(t);
    }
  }

  function start(req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void {
    if (pipelinedTooDeep(req.socket)) {
      // Said once per connection; its requests in progress are released as it closes.
      if (!req.socket.destroyed) {
        metrics.pipeliningClosed.inc();
        log.warn({ ip: req.socket.remoteAddress, limit: MAX_PIPELINED_REQUESTS }, 'connection closed: more pipelined requests in progress than allowed');
        req.socket.destroy();
      }
      return;
    }
    const t: Trace = {
      id: newRequestId(d.clock.now()),
      start: performance.now(),
      method: req.method ?? 'GET',
      path: '',
      family: 'other',
      ip: '',
      expectsContinue,
      lease: null,
      webSocket: res instanceof UpgradeResponse,
    };
    metrics.inflight++;
    traces.set(res, t);
    res.on('close', () => responseClosed(res, t));
    closesWithConnection(req.socket, res);
    if (d.draining()) res.setHeader('connection', 'close');
    handle(req, res, t).catch((err: unknown) => {
      if (err instanceof StoreUnavailableError) {
        log.error({ reqId: t.id, err: err.message }, 'limit store unreachable (limits.onStoreError=closed)');
        return refuse(res, t, Refusals.STORE_UNAVAILABLE);
      }
      // A compressed body whose decoding the budget could not hold.
      if (err instanceof BodyBudgetExceededError) return res.destroyed ? undefined : refuseBusy(res, t, req);
      log.error({ reqId: t.id, err: err instanceof Error ? err.stack : String(err) }, 'request handler failed');
      refuse(res, t, Refusals.INTERNAL);
    });
  }

  const gateway = ((req, res) => start(req, res, false)) as Gateway;
  gateway.checkContinue = (req, res) => start(req, res, true);
  gateway.upgrade = (req, socket, head) => {
    // Sent behind a request still being answered on its connection (pipelining): the connection
    // is that answer's, and no client does this. Closed, as a connection over its pipelining bound is.
    if (answerOnConnection(socket) !== null) {
      metrics.pipeliningClosed.inc();
      log.warn({ ip: socket.remoteAddress }, 'connection closed: a WebSocket upgrade came behind a request still being answered');
      return void socket.destroy();
    }
    // A refused client gets as long to take its answer as it had to send its headers.
    const res = new UpgradeResponse(req, socket, head, d.policy().config.server.headersTimeoutSeconds * 1000);
    upgrading.add(res);
    res.on('close', () => upgrading.delete(res));
    start(req, res, false);
  };
  gateway.cutUpgrades = () => {
    for (const res of upgrading) res.destroy();
  };
  gateway.requestTimedOut = (res, seconds) => {
    const t = traces.get(res);
    if (t === undefined || t.logged || res.headersSent || res.destroyed) return false;
    refuse(res, t, Refusals.REQUEST_TIMEOUT, { params: { seconds } });
    return true;
  };
  return gateway;
}
