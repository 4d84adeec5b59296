/**
 * The admin listener (cluster-internal): health, readiness, keys and limit
 * state. JSON in and out; every /admin/* call needs the admin token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { bearerToken } from '../auth/credentials.js';
import { userId } from './ids.js';
import type { KeyService } from './keys.js';
import { AdminError, AdminErrors, StoreUnavailableError, type AdminErrorSpec } from '../answers/errors.js';
import type { FreeTierLimiter } from '../limits/free-tier.js';
import type { Metrics } from '../metrics/index.js';

export interface Readiness {
  ready: boolean;
  /** Per dependency: a short state, and details an operator reads. */
  checks: Record<string, unknown>;
}

export interface AdminDeps {
  log: Logger;
  adminToken: string | null;
  keys: KeyService;
  /** The current free-tier limiter (it changes on config reload). */
  freeTier: () => FreeTierLimiter;
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

/** Drops the rest of a refused request body (bounded by MAX_DISCARD) instead of resetting the connection. */
function discardRest(req: IncomingMessage, already: number): void {
  let dropped = already;
  req.removeAllListeners('data');
  req.on('data', (c: Buffer) => {
    dropped += c.length;
    if (dropped > MAX_DISCARD) req.socket.destroy();
  });
  req.resume();
}

function readJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_ADMIN_BODY) {
    if (declared > MAX_DISCARD) res.setHeader('connection', 'close');
    else discardRest(req, 0);
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_ADMIN_BODY && !refused) {
        // A chunked body (no declared length) that grew past the limit.
        refused = true;
        chunks.length = 0;
        discardRest(req, size);
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (refused) return;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve({});
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new AdminError(AdminErrors.INVALID_JSON));
      }
    });
    req.on('error', reject);
  });
}

export function createAdminHandler(d: AdminDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const tokenDigest = d.adminToken ? createHash('sha256').update(d.adminToken).digest() : null;

  function authorized(req: IncomingMessage): boolean {
    if (!tokenDigest || req.headers.authorization === undefined) return false;
    const given = createHash('sha256').update(bearerToken(req.headers.authorization)).digest();
    return timingSafeEqual(given, tokenDigest);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
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
    if (!authorized(req)) return fail(res, d.adminToken ? AdminErrors.UNAUTHORIZED : AdminErrors.DISABLED);

    if (path === '/admin/keys' && method === 'POST') {
      const body = await readJson(req, res);
      const created = await d.keys.create(body);
      d.log.info({ keyId: created.id, user: created.user }, 'key created');
      return json(res, 201, created);
    }
    if (path === '/admin/keys' && method === 'GET') {
      const user = url.searchParams.get('user');
      if (!user) return fail(res, AdminErrors.MISSING_USER);
      return json(res, 200, { keys: await d.keys.list(user) });
    }
    const keyMatch = /^\/admin\/keys\/([^/]+)$/.exec(path);
    if (keyMatch && method === 'DELETE') {
      const removed = await d.keys.remove(pathSegment(keyMatch[1]!));
      if (!removed) return fail(res, AdminErrors.KEY_NOT_FOUND);
      d.log.info({ keyId: removed.id, user: removed.user }, 'key deleted');
      res.writeHead(204);
      return void res.end();
    }
    const limitMatch = /^\/admin\/users\/([^/]+)\/limits$/.exec(path);
    if (limitMatch && method === 'GET') {
      return json(res, 200, { freeTier: await d.freeTier().state(userId(pathSegment(limitMatch[1]!))) });
    }
    if (path === '/admin/config' && method === 'GET') return json(res, 200, d.effectiveConfig());
    return fail(res, AdminErrors.NOT_FOUND);
  }

  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof AdminError) return fail(res, err);
      if (err instanceof StoreUnavailableError) {
        d.log.error({ err: err.message }, 'admin request failed: the store could not be reached');
        return fail(res, AdminErrors.STORE_UNAVAILABLE);
      }
      // Neither a refusal nor the store: sluice's own fault, answered as such.
      d.log.error({ err: err instanceof Error ? err.stack : String(err) }, 'admin request failed');
      fail(res, AdminErrors.INTERNAL);
    });
  };
}
