/**
 * WebSocket upgrades (`GET /v1/realtime`, OpenAI's Realtime API, which new-api relays). Node's
 * server hands an upgrade to its 'upgrade' listener as a bare socket; here it gets a response the
 * gateway answers on as on any request (a 401, a 429, the relay's own answer when it does not
 * switch). The switch itself is the forwarder's (src/forward/proxy.ts).
 *
 * Only a GET asking for `websocket`, with no body, is taken as an upgrade (the server's
 * `shouldUpgradeCallback`); any other `Upgrade` (curl's `h2c`) is served as an ordinary request,
 * its `Upgrade` dropped as hop-by-hop. Node's server has that callback from 24.9 on: on an older
 * Node (20, for development) nothing is upgraded, and such a request is an ordinary one as well.
 */
import { Server, ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { announcesBytes } from './body.js';

/** Whether `req` asks to switch to WebSocket (RFC 6455 §4.1: a GET, `Upgrade` naming `websocket`), with no body. */
export function isWebSocketUpgrade(req: IncomingMessage): boolean {
  const upgrade = req.headers.upgrade;
  if (req.method !== 'GET' || upgrade === undefined || announcesBytes(req)) return false;
  return upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
}

/** Whether this Node's HTTP server takes `shouldUpgradeCallback` (it keeps the option it knows). */
export const upgradesSupported: boolean = (() => {
  const decide = (): boolean => false;
  return (
    (new Server({ shouldUpgradeCallback: decide } as ConstructorParameters<typeof Server>[0]) as Server & { shouldUpgradeCallback?: unknown }).shouldUpgradeCallback === decide
  );
})();

/**
 * A response on an upgrade's socket, for the gateway's answers before the switch. It closes the
 * connection once written (its request's connection has left Node's HTTP parsing: no request can
 * follow on it), and at the latest `lingerMs` later: Node's server no longer bounds this
 * connection, and a client that neither reads the answer nor closes would hold it for good.
 */
export function responseOnSocket(req: IncomingMessage, socket: Duplex, lingerMs: number): ServerResponse {
  // Node's server took its own error listener off the socket: without one, an error would end the process.
  socket.on('error', ignore);
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.on('finish', () => {
    socket.end();
    (socket as Socket).setTimeout(lingerMs, () => socket.destroy());
  });
  return res;
}

function ignore(): void {
  // The socket's 'close' follows: the response closes with it.
}

/** The answer in progress on a connection (Node's server keeps it on the socket), if any. */
export function answerInProgress(socket: Duplex): boolean {
  return ((socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? null) !== null;
}
