/**
 * A WebSocket session: an upgrade's client (src/http/upgrade.ts) joined to the relay that switched.
 * The relay's 101 is passed on as it wrote it (`Connection` and `Upgrade` included: they are the
 * switch; sluice's `extra` fields added where it sent none), then bytes go both ways, unchanged,
 * with each side's backpressure, until either side closes, or one side ended its half and the
 * other did not follow within the linger. The forwarder (proxy.ts) owns the exchange around it: its bounds, its count, its line.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { UpgradeResponse } from '../http/upgrade.js';

/** What the exchange hears from its session. */
export interface TunnelEvents {
  /** A byte moved, either way (the idle bound). */
  moved(): void;
  /** The session is over: a side closed. */
  ended(): void;
}

export class Tunnel {
  private readonly client: Socket;
  /** Set once the client ended its side: the relay has the linger to end its own. */
  private clientEnded: NodeJS.Timeout | null = null;

  /**
   * @param relayHead what the relay sent after its 101, in the same read
   * @param extra sluice's own fields for the 101 (a free call's RateLimit), where the relay sent none of the same name
   */
  constructor(
    private readonly res: UpgradeResponse,
    private readonly relay: Duplex,
    up: IncomingMessage,
    relayHead: Buffer,
    extra: Readonly<Record<string, string>>,
    private readonly events: TunnelEvents,
  ) {
    this.client = res.socket!;
    const early = res.takeEarlyBytes();
    // Its 'close' ends the session; an error comes with one.
    relay.on('error', ignore);
    relay.on('close', this.onRelayClose);
    // The agent's idle bound stays on a socket it gave up: a session's silences are the forwarder's.
    (relay as Socket).setTimeout(0);
    let head = `HTTP/1.1 101 ${up.statusMessage || 'Switching Protocols'}\r\n`;
    for (let i = 0; i < up.rawHeaders.length; i += 2) head += `${up.rawHeaders[i]}: ${up.rawHeaders[i + 1]}\r\n`;
    for (const name in extra) {
      if (up.headers[name] === undefined) head += `${name}: ${extra[name]}\r\n`;
    }
    this.client.write(`${head}\r\n`, 'latin1');
    if (relayHead.length > 0) this.client.write(relayHead);
    if (early.length > 0) relay.write(early);
    relay.on('data', events.moved);
    this.client.on('data', events.moved);
    relay.pipe(this.client);
    this.client.pipe(relay);
    this.client.once('end', this.onClientEnd);
  }

  /** Bytes wait for the client: it is not reading. */
  get clientBehind(): boolean {
    return this.client.writableLength > 0;
  }

  /** Closes both sides at once. */
  close(): void {
    if (this.clientEnded !== null) clearTimeout(this.clientEnded);
    this.relay.destroy();
    this.res.destroy();
  }

  /**
   * The client ended its side (the pipe ends the relay's): the relay's close ends the session, and
   * the linger bounds the wait, as a relay's end bounds the client's (a client that ends its side
   * has left; a relay that keeps its own open would hold the session to the idle bound, or for good).
   */
  private readonly onClientEnd = (): void => {
    this.clientEnded = setTimeout(this.events.ended, this.res.lingerMs).unref();
  };

  private readonly onRelayClose = (): void => {
    // The relay ended its side cleanly (the pipe ends the client's): the client's close ends the
    // session, so that the relay's last bytes (a closing frame) reach it whole. Closed at once,
    // with the client's own closing frame unread, the connection would be reset instead.
    if (this.relay.readableEnded) {
      // What the client still sends has nowhere to go: read and dropped until it closes (an unpipe
      // pauses its source, and a paused socket would never show the client's close).
      this.client.unpipe(this.relay);
      this.client.resume();
      this.res.endGently();
      return;
    }
    this.events.ended();
  };
}

function ignore(): void {
  // Its 'close' follows.
}
