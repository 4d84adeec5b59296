/**
 * The admin listener (cluster-internal): health, readiness, keys, "whose key is this", limit
 * state and resets. JSON in and out; every /admin/* call needs the admin token, and each one
 * gets one log line naming its action and the token's fingerprint (never the token).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { bearerToken } from '../auth/credentials.js';
import { namedAddress, userId } from './ids.js';
import { lookupRequest, type KeyLookup } from './key-lookup.js';
import type { KeyService } from './keys.js';
import { AdminError, AdminErrors, type AdminErrorSpec } from './errors.js';
import { StoreUnavailableError } from '../store/unavailable.js';
import type { FreeTierLimiter } from '../limits/free-tier.js';
import type { IpLimiter } from '../limits/ip.js';
import type { Metrics } from '../metrics/index.js';
import { declaredLength, dropRest, readBody } from '../http/body.js';
import { ADMIN_MAX_CONNECTIONS } from '../http/connections.js';

export interface Readiness {
  ready: boolean;
  /** Per dependency: a short state, and details an operator reads. */
  checks: Record<string, unknown>;
}

export interface AdminDeps {
  log: Logger;
  adminToken: string | null;
  keys: KeyService;
  /** What the key sources say of a key, asked directly (src/admin/key-lookup.ts). */
  lookupKey: (key: string) => Promise<KeyLookup>;
  /** The current limiters (they change on config reload). */
  limits: () => { freeTier: FreeTierLimiter; ipLimiter: IpLimiter };
  metrics: Metrics;
  /** Whether this replica should get traffic, with what each dependency says (shown in /readyz). */
  ready: () => Promise<Readiness>;
  effectiveConfig: () => Record<string, unknown>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

function fail(res: ServerResponse, err: AdminErrorSpec | AdminError): void {
  json(res, err.status, { error: { code: err.code, message: err.message } });
}

/**
 * The first 8 hex digits of the admin token's SHA-256: which token made a call (one that was
 * rotated shows a new one), told without the token. `printf %s "$SLUICE_ADMIN_TOKEN" | sha256sum | cut -c1-8`.
 */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 8);
}

/** An address as a path segment names it: percent-decoded, in brackets or not (`[2001:db8::5]`). */
function pathAddress(raw: string): string {
  const text = pathSegment(raw);
  return text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
}

const MAX_ADMIN_BODY = 64 * 1024;
/**
 * A refused body's rest is read and dropped up to this many bytes, so that a client still
 * uploading it reads the 413 instead of a reset: closing a socket with unread bytes in it makes
 * the kernel answer with RST, which can discard the answer before the client reads it. Past this
 * the connection is closed (a declared length beyond it is answered with `connection: close` at once).
 */
const MAX_DISCARD = 4 * 1024 * 1024;

const tooLarge = (): AdminError => new AdminError(AdminErrors.BODY_TOO_LARGE, { limit: MAX_ADMIN_BODY });

/** A percent-encoded path segment, decoded; a malformed one is the client's mistake (400). */
function pathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new AdminError(AdminErrors.MALFORMED_URL);
  }
}

/** The body never arrived whole: its client left, or Node's request timeout closed the connection. */
class ConnectionClosedError extends Error {
  override name = 'ConnectionClosedError';
  constructor() {
    super('the connection closed before the body arrived');
  }
}

/**
 * The request's JSON body (an empty one is `{}`), at most MAX_ADMIN_BODY. Past it, 413: the rest
 * is read and dropped up to MAX_DISCARD so that the operator reads the answer, and past that the
 * connection closes.
 */
async function readJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const declared = declaredLength(req);
  if (declared > MAX_DISCARD) res.setHeader('connection', 'close');
  const read = await readBody(req, MAX_ADMIN_BODY);
  if (!read.ok) {
    if (read.reason !== 'too_large') throw new ConnectionClosedError();
    // A declared length is judged before any byte is read; a chunked body ran past the bound.
    if (declared <= MAX_DISCARD) dropRest(req, declared === -1 ? MAX_DISCARD - MAX_ADMIN_BODY : MAX_DISCARD);
    throw tooLarge();
  }
  const text = read.body.toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new AdminError(AdminErrors.INVALID_JSON);
  }
}

/** The admin listener: its own bounds, a few connections (probes, scrapes, operators). */
export function createAdminServer(d: AdminDeps): Server {
  const server = http.createServer({ headersTimeout: 15_000, requestTimeout: 30_000, connectionsCheckingInterval: 1000 }, createAdminHandler(d));
  server.maxConnections = ADMIN_MAX_CONNECTIONS;
  return server;
}

export function createAdminHandler(d: AdminDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const tokenDigest = d.adminToken ? createHash('sha256').update(d.adminToken).digest() : null;
  const fingerprint = d.adminToken ? tokenFingerprint(d.adminToken) : null;

  function authorized(req: IncomingMessage): boolean {
    if (!tokenDigest || req.headers.authorization === undefined) return false;
    const given = createHash('sha256').update(bearerToken(req.headers.authorization)).digest();
    return timingSafeEqual(given, tokenDigest);
  }

  /** What one admin call did, for its log line: the action, and what it acted on (ids, never keys). */
  interface Call {
    req: IncomingMessage;
    res: ServerResponse;
    url: URL;
    match: RegExpExecArray;
    /** Adds fields to the call's log line. */
    note: (fields: Record<string, unknown>) => void;
  }

  /** The admin API: method, path, the action its log line names, and what it does. */
  const ROUTES: ReadonlyArray<{ method: string; path: RegExp; action: string; run: (c: Call) => Promise<void> }> = [
    {
      method: 'POST',
      path: /^\/admin\/keys\/lookup$/,
      action: 'keys.lookup',
      async run({ req, res, note }) {
        const key = lookupRequest(await readJson(req, res));
        const found = await d.lookupKey(key);
        note({ keyId: found.id ?? undefined, user: found.user ?? undefined, source: found.source, valid: found.valid, reason: found.reason ?? undefined });
        json(res, 200, found);
      },
    },
    {
      method: 'POST',
      path: /^\/admin\/keys$/,
      action: 'keys.create',
      async run({ req, res, note }) {
        const created = await d.keys.create(await readJson(req, res));
        note({ keyId: created.id, user: created.user });
        json(res, 201, created);
      },
    },
    {
      method: 'GET',
      path: /^\/admin\/keys$/,
      action: 'keys.list',
      async run({ res, url, note }) {
        const user = url.searchParams.get('user');
        if (!user) return fail(res, AdminErrors.MISSING_USER);
        const keys = await d.keys.list(user);
        note({ user, keys: keys.length });
        json(res, 200, { keys });
      },
    },
    {
      method: 'DELETE',
      path: /^\/admin\/keys\/([^/]+)$/,
      action: 'keys.delete',
      async run({ res, match, note }) {
        const removed = await d.keys.remove(pathSegment(match[1]!));
        if (!removed) return fail(res, AdminErrors.KEY_NOT_FOUND);
        note({ keyId: removed.id, user: removed.user });
        res.writeHead(204);
        res.end();
      },
    },
    {
      method: 'GET',
      path: /^\/admin\/users\/([^/]+)\/limits$/,
      action: 'limits.show',
      async run({ res, match, note }) {
        const user = userId(pathSegment(match[1]!));
        note({ user });
        json(res, 200, { freeTier: await d.limits().freeTier.state(user) });
      },
    },
    {
      method: 'DELETE',
      path: /^\/admin\/users\/([^/]+)\/limits$/,
      action: 'limits.reset',
      async run({ res, match, note }) {
        const user = userId(pathSegment(match[1]!));
        note({ user });
        json(res, 200, { freeTier: await d.limits().freeTier.reset(user) });
      },
    },
    {
      method: 'GET',
      path: /^\/admin\/ips\/([^/]+)\/limits$/,
      action: 'limits.show',
      async run({ res, match, note }) {
        const ip = d.limits().ipLimiter;
        const at = namedAddress(ip, pathAddress(match[1]!));
        note({ ip: at.address, bucket: at.bucket });
        json(res, 200, { ipLimits: await ip.state(at.address) });
      },
    },
    {
      method: 'DELETE',
      path: /^\/admin\/ips\/([^/]+)\/limits$/,
      action: 'limits.reset',
      async run({ res, match, note }) {
        const ip = d.limits().ipLimiter;
        const at = namedAddress(ip, pathAddress(match[1]!));
        note({ ip: at.address, bucket: at.bucket });
        json(res, 200, { ipLimits: await ip.reset(at.address) });
      },
    },
    {
      method: 'GET',
      path: /^\/admin\/config$/,
      action: 'config.show',
      async run({ res }) {
        json(res, 200, d.effectiveConfig());
      },
    },
  ];

  async function handle(req: IncomingMessage, res: ServerResponse, line: Record<string, unknown>): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://admin');
    } catch {
      return fail(res, AdminErrors.MALFORMED_URL);
    }
    const path = url.pathname;
    const method = req.method ?? 'GET';

    if (path === '/healthz') return json(res, 200, { status: 'ok' });
    if (path === '/metrics' && method === 'GET') {
      const text = await d.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': d.metrics.registry.contentType });
      return void res.end(text);
    }
    if (path === '/readyz') {
      const r = await d.ready();
      return json(res, r.ready ? 200 : 503, { status: r.ready ? 'ready' : 'not ready', checks: r.checks });
    }
    if (!path.startsWith('/admin/')) return fail(res, AdminErrors.NOT_FOUND);
    let route: (typeof ROUTES)[number] | undefined;
    let match: RegExpExecArray | null = null;
    for (const r of ROUTES) {
      if (r.method !== method) continue;
      match = r.path.exec(path);
      if (match) {
        route = r;
        break;
      }
    }
    line.action = route?.action ?? 'unknown';
    if (!authorized(req)) return fail(res, d.adminToken ? AdminErrors.UNAUTHORIZED : AdminErrors.DISABLED);
    line.admin = fingerprint;
    if (!route || !match) return fail(res, AdminErrors.NOT_FOUND);
    await route.run({ req, res, url, match, note: (fields) => Object.assign(line, fields) });
  }

  /**
   * One line per /admin/* call: info for a call the token allowed (whatever its answer), warn for
   * one refused for its token (an unknown action is named `unknown`), and info for one whose
   * connection closed before its answer, with why (`err`).
   */
  function logCall(res: ServerResponse, line: Record<string, unknown>): void {
    if (line.action === undefined) return;
    if (!res.writableEnded) return void d.log.info({ ...line, status: null }, 'admin call abandoned: the connection closed before the answer');
    line.status = res.statusCode;
    if (line.admin === undefined) d.log.warn(line, 'admin call refused: missing or wrong admin token');
    else d.log.info(line, 'admin action');
  }

  return (req, res) => {
    const line: Record<string, unknown> = {};
    handle(req, res, line)
      .catch((err: unknown) => {
        // Begun, or its connection gone: nothing can be answered. What went wrong is still told.
        if (res.headersSent || res.destroyed) {
          line.err = err instanceof Error ? err.message : String(err);
          if (!(err instanceof ConnectionClosedError || err instanceof AdminError))
            d.log.error({ action: line.action, err: err instanceof Error ? err.stack : String(err) }, 'admin request failed');
          return void res.destroy();
        }
        if (err instanceof AdminError) {
          line.code = err.code;
          return fail(res, err);
        }
        if (err instanceof StoreUnavailableError) {
          d.log.error({ action: line.action, err: err.message }, 'admin request failed: the store could not be reached');
          return fail(res, AdminErrors.STORE_UNAVAILABLE);
        }
        // Neither a refusal nor the store: sluice's own fault, answered as such.
        d.log.error({ action: line.action, err: err instanceof Error ? err.stack : String(err) }, 'admin request failed');
        fail(res, AdminErrors.INTERNAL);
      })
      .finally(() => logCall(res, line));
  };
}
