/**
 * WebSocket upgrades (`GET /v1/realtime`, OpenAI's Realtime API, which new-api relays). Node's
 * server hands an upgrade to its 'upgrade' listener as a bare socket; here it gets a response the
 * gateway answers on as on any request (a 401, a 429, the relay's own answer when it does not
 * switch). The switch itself is the forwarder's (src/forward/proxy.ts; the session,
 * src/forward/tunnel.ts).
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

/**
 * Whether this Node's HTTP server takes `shouldUpgradeCallback`: a server keeps the options it
 * knows, so one made with it tells (no release numbers to compare, whichever line backports it).
 */
export const upgradesSupported: boolean = (() => {
  const decide = (): boolean => false;
  const server = new Server({ shouldUpgradeCallback: decide } as ConstructorParameters<typeof Server>[0]) as Server & { shouldUpgradeCallback?: unknown };
  return server.shouldUpgradeCallback === decide;
})();

/**
 * Bytes a client may send after its upgrade request, before the relay switched. RFC 6455 has it
 * wait for the switch (none, from any real client); past this the connection is closed. Small:
 * they are held until the switch (up to upstream.headersTimeoutSeconds), outside the bodies' budget.
 */
export const EARLY_BYTES_MAX = 4 * 1024;

/**
 * A response on an upgrade's socket, for the gateway's answers before the switch, and the
 * connection until then. Node's server no longer watches this connection, and hands it over
 * paused: it is read here, so that a client that leaves is seen at once (its end too: no
 * WebSocket client half-closes; its 'close' closes the
 * response, as on any request: the relay's request is aborted), and what a client sends early is
 * kept for the relay (EARLY_BYTES_MAX). An answer ends the connection once written (no request
 * can follow on it), and closes it `lingerMs` after it was handed to the socket at the latest: a
 * client that neither reads it nor closes would hold the connection for good.
 */
export class UpgradeResponse extends ServerResponse {
  private early: Buffer[] = [];
  private earlyBytes = 0;
  /** How long an ended connection may linger before it is closed (endGently), and a session waits for one side once the other ended (tunnel.ts), in ms. */
  readonly lingerMs: number;
  private ending = false;

  constructor(req: IncomingMessage, socket: Duplex, head: Buffer, lingerMs: number) {
    super(req);
    this.lingerMs = lingerMs;
    this.shouldKeepAlive = false;
    this.assignSocket(socket as Socket);
    // Node's server took its own error listener off the socket: without one, an error would end the process.
    socket.on('error', ignore);
    if (head.length > 0) this.keep(head);
    socket.on('data', this.onEarly);
    // No WebSocket client half-closes: one that ends its side before the switch has left.
    socket.on('end', this.onClientEnd);
    // Once the answer is handed to the socket ('prefinish'), not once the client took it ('finish'):
    // a client that reads nothing would never let it finish.
    this.on('prefinish', () => this.endGently());
  }

  private readonly onEarly = (chunk: Buffer): void => {
    // After an answer, what still comes is read and dropped until the client closes.
    if (!this.writableEnded) this.keep(chunk);
  };

  private readonly onClientEnd = (): void => {
    if (!this.writableEnded) this.destroy();
  };

  private keep(chunk: Buffer): void {
    this.earlyBytes += chunk.length;
    if (this.earlyBytes > EARLY_BYTES_MAX) return void this.destroy();
    this.early.push(chunk);
  }

  /** The relay switched: stops reading, and gives what the client sent meanwhile, for the relay. */
  takeEarlyBytes(): Buffer {
    const socket = this.socket;
    socket?.off('data', this.onEarly);
    socket?.off('end', this.onClientEnd);
    socket?.pause();
    const bytes = Buffer.concat(this.early);
    this.early = [];
    return bytes;
  }

  /**
   * Ends the connection once what was written is out, and closes it `lingerMs` later whatever the
   * client does (a timer, not the socket's idle bound: a client that keeps sending would keep that
   * from ever firing).
   */
  endGently(): void {
    const socket = this.socket;
    if (socket === null || socket.destroyed || this.ending) return;
    this.ending = true;
    socket.end();
    const timer = setTimeout(() => socket.destroy(), this.lingerMs).unref();
    socket.once('close', () => clearTimeout(timer));
  }
}

function ignore(): void {
  // The socket's 'close' follows: the response closes with it.
}
