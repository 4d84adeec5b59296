/**
 * The public listener: Node's HTTP server with the timeouts of `server.*`, the connection cap,
 * every connection counted, `Expect: 100-continue` and WebSocket upgrades routed to the gateway, and what Node's parser
 * leaves to answer before there is a request (a malformed request, headers too large or too slow).
 */
import http, { type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { SocketRefusals, socketRefusalBytes, type SocketRefusal } from '../answers/refusals.js';
import { MAX_CONNECTIONS_CAP, type Config } from '../config/index.js';
import type { Gateway } from '../gateway.js';
import type { Metrics } from '../metrics/index.js';
import { connectionCap } from './connections.js';
import { answerOnConnection } from './pipelining.js';
import { isWebSocketUpgrade, upgradesSupported } from './upgrade.js';

export interface PublicServerDeps {
  gateway: Gateway;
  metrics: Metrics;
  log: Logger;
  /** The config in force now (a reload changes it). */
  config: () => Config;
  /** The descriptor limit the connection cap is derived from (null: unknown). */
  openFileLimit: number | null;
  /** A connection was closed on arrival for the cap. */
  dropped: () => void;
}

export function createPublicServer(d: PublicServerDeps): Server {
  const { gateway, metrics, log } = d;
  const server = http.createServer(
    {
      noDelay: true,
      // Node checks these bounds on one interval over all connections (no timer per request): every second, so a bound is kept to within one.
      connectionsCheckingInterval: 1000,
      // WebSocket upgrades go to the gateway's `upgrade`; any other Upgrade is an ordinary request.
      ...(upgradesSupported ? { shouldUpgradeCallback: isWebSocketUpgrade } : {}),
    },
    gateway,
  );
  if (upgradesSupported) server.on('upgrade', gateway.upgrade);
  // A stream may stay silent for minutes while a model reasons: no idle cut-off on the response side.
  server.timeout = 0;
  configurePublicServer(server, d.config(), d);
  server.on('drop', () => {
    metrics.droppedConnections.inc();
    d.dropped();
  });
  server.on('connection', (socket: Socket) => {
    metrics.connections++;
    socket.once('close', () => void metrics.connections--);
  });
  // `Expect: 100-continue`: the client is invited to send its body only once sluice would read it.
  server.on('checkContinue', gateway.checkContinue);
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // The response of a request still arriving (its body, mostly), if any.
    const inFlight = answerOnConnection(socket);
    let refusal: SocketRefusal;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      metrics.requestTimeouts.inc();
      // A request the gateway is reading gets the relay's JSON shape and its access line.
      if (inFlight !== null && gateway.requestTimedOut(inFlight, d.config().server.requestTimeoutSeconds)) return;
      refusal = SocketRefusals.HEADERS_TIMEOUT;
      log.debug({ code: err.code }, 'request headers not received in time');
    } else {
      refusal = err.code === 'HPE_HEADER_OVERFLOW' ? SocketRefusals.HEADERS_TOO_LARGE : SocketRefusals.MALFORMED;
      log.debug({ err: err.message, code: err.code }, 'malformed request from client');
    }
    if (socket.writable && !socket.destroyed && (inFlight === null || !inFlight.headersSent)) {
      // Closed once written: a client that never closes its side must not keep the connection (and a place under the cap).
      socket.end(socketRefusalBytes(refusal), () => socket.destroy());
    } else {
      socket.destroy();
    }
  });
  return server;
}

/**
 * Applies `server.*`: the timeouts (Node's server options) and the connection cap. At start and on
 * every reload; a cap lowered by a reload leaves the connections already open, and new ones wait
 * for room.
 */
export function configurePublicServer(server: Server, c: Config, d: Pick<PublicServerDeps, 'metrics' | 'log' | 'openFileLimit'>): void {
  server.headersTimeout = c.server.headersTimeoutSeconds * 1000;
  server.requestTimeout = c.server.requestTimeoutSeconds * 1000;
  server.keepAliveTimeout = c.server.keepAliveTimeoutSeconds * 1000;
  const cap = connectionCap(c.server.maxConnections, d.openFileLimit, MAX_CONNECTIONS_CAP);
  if (cap.warning && cap.cap !== server.maxConnections) d.log.warn({ maxConnections: cap.cap, openFileLimit: d.openFileLimit }, cap.warning);
  // Over the cap Node closes a new connection as it arrives, before reading anything: no answer, no
  // descriptor held. Clients (and load balancers) see a connection error and retry, elsewhere if they can.
  server.maxConnections = cap.cap;
  d.metrics.maxConnections.set(cap.cap);
}
