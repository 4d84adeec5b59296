/**
 * HTTP/1.1 pipelining: a connection's requests in progress, answered in turn. Node gives a
 * response queued behind another no 'close' when the connection dies, and reads every request a
 * client has sent before any answer is written; both are bounded here. And a connection's requests
 * reach the relay one at a time (relayTurn).
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/**
 * The responses of each connection not closed yet. Node answers a connection's requests in order,
 * and a response queued behind another (pipelining) gets no 'close' when the connection dies: it
 * is closed here as Node closes the one under way, or what its request holds (the in-flight count,
 * its body's budget, a relay exchange) stays held for good.
 */
const pending = new WeakMap<Socket, Set<ServerResponse>>();

/**
 * Requests one connection may have in progress at once (pipelined, each answered in turn). No SDK
 * or browser pipelines; a client that sends thousands without reading would otherwise have every
 * one handled at once (a relay socket each, its answer held until its turn). The connection of a
 * request past it is closed, as one over server.maxConnections is: a constant, not a setting.
 */
export const MAX_PIPELINED_REQUESTS = 32;

/** Whether `socket` already has MAX_PIPELINED_REQUESTS requests in progress. */
export function pipelinedTooDeep(socket: Socket): boolean {
  const open = pending.get(socket);
  return open !== undefined && open.size >= MAX_PIPELINED_REQUESTS;
}

/** Counts `res` among its connection's responses in progress, closed with the connection if still queued then. */
export function closesWithConnection(socket: Socket, res: ServerResponse): void {
  let open = pending.get(socket);
  if (open === undefined) {
    const responses = (open = new Set());
    pending.set(socket, responses);
    socket.once('close', () => {
      for (const r of responses) {
        if (r.socket !== null) continue; // the one under way: Node closes it
        r.destroyed = true;
        r.emit('close');
      }
      responses.clear();
    });
  }
  open.add(res);
}

/**
 * The answer Node's server is writing on a connection, if any (it keeps it on the socket): a
 * request still arriving when the connection fails, or one an upgrade came behind.
 */
export function answerOnConnection(socket: Duplex): ServerResponse | null {
  return (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? null;
}

/** `res` closed: no longer in progress on its connection. */
export function closedOnConnection(res: ServerResponse): void {
  pending.get(res.req.socket)?.delete(res);
}

/**
 * Resolves once the response before `res` on its connection has closed (and so every earlier one);
 * null when none is in progress before it. A connection's requests reach the relay one at a time:
 * its answers leave in order anyway, and the descriptor budget (src/http/connections.ts) counts one
 * relay socket per client connection. Forwarded at once, a client pipelining MAX_PIPELINED_REQUESTS
 * slow calls held that many relay sockets, and 40 such connections spent a 1,024-descriptor limit
 * (an attacker's probe): clients and even the admin port's probes were refused.
 */
export function relayTurn(res: ServerResponse): Promise<void> | null {
  const open = pending.get(res.req.socket);
  let before: ServerResponse | undefined;
  if (open !== undefined) {
    for (const r of open) {
      if (r === res) break;
      before = r;
    }
  }
  if (before === undefined) return null;
  const previous = before;
  return new Promise((resolve) => previous.once('close', () => resolve()));
}
