/** Raw loopback sockets for the hostile suite: bytes exactly as an attacker writes them, answers as they come. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, afterEach } from 'vitest';

export interface RawConnection {
  socket: net.Socket;
  /** Everything received so far, as latin1 text. */
  text(): string;
  /** The server closed (or reset) the connection. */
  readonly closed: boolean;
  /** Resolves with `text()` once it matches `re`, or the connection closed, or `ms` passed. */
  waitFor(re: RegExp, ms: number): Promise<string>;
  write(data: string | Buffer): void;
  destroy(): void;
}

/**
 * The raw connections a describe block's tests open (push each one), destroyed after every test,
 * or once after all of them (`after: 'all'`), then `then` (e.g. waiting for what they held to go).
 */
export function rawConnections(opts: { after?: 'each' | 'all'; then?: () => Promise<unknown> } = {}): RawConnection[] {
  const open: RawConnection[] = [];
  const close = async (): Promise<void> => {
    for (const c of open.splice(0)) c.destroy();
    await opts.then?.();
  };
  if (opts.after === 'all') afterAll(close);
  else afterEach(close);
  return open;
}

/** Connects to 127.0.0.1:`port` and writes `first` (if given) at once. Rejects only if the connect itself fails. */
export function openRaw(port: number, first?: string | Buffer): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    let received = '';
    let closed = false;
    const waiters = new Set<() => void>();
    const wake = (): void => {
      for (const w of [...waiters]) w();
    };
    const socket = net.connect(port, '127.0.0.1');
    socket.on('data', (b: Buffer) => {
      received += b.toString('latin1');
      wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      closed = true;
      wake();
    });
    const conn: RawConnection = {
      socket,
      text: () => received,
      get closed() {
        return closed;
      },
      waitFor(re, ms) {
        return new Promise((done) => {
          const check = (): void => {
            if (!re.test(received) && !closed) return;
            finish();
          };
          const finish = (): void => {
            clearTimeout(timer);
            waiters.delete(check);
            done(received);
          };
          const timer = setTimeout(finish, ms);
          waiters.add(check);
          check();
        });
      },
      write: (data) => {
        if (!socket.destroyed) socket.write(data);
      },
      destroy: () => socket.destroy(),
    };
    socket.once('connect', () => {
      if (first !== undefined) socket.write(first);
      resolve(conn);
    });
    socket.once('error', (err) => {
      if (!socket.connecting) return;
      reject(err);
    });
  });
}

/** A relay on raw TCP, answering by its current `mode`; counts its connections and the bytes it wrote. */
export interface RawRelay<M extends string> {
  url: string;
  mode: M;
  opened: number;
  closed: number;
  written: number;
  /** Writes `data` on `socket`, counted in `written`. */
  write(socket: net.Socket, data: string): boolean;
  close(): Promise<void>;
}

/**
 * Starts a relay that writes exactly the bytes a test gives it: each time a request's head is in
 * (its blank line; what follows is not parsed), `answer` writes on the socket. `stopReading` ends
 * that for the connection, so that `answer` can hold what the socket does next.
 */
export async function startRawRelay<M extends string>(mode: M, answer: (socket: net.Socket, relay: RawRelay<M>, stopReading: () => void) => void): Promise<RawRelay<M>> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    relay.opened++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      relay.closed++;
    });
    let head = '';
    const onData = (b: Buffer): void => {
      head += b.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      head = '';
      answer(socket, relay, () => socket.off('data', onData));
    };
    socket.on('data', onData);
  });
  const relay: RawRelay<M> = {
    url: '',
    mode,
    opened: 0,
    closed: 0,
    written: 0,
    write(socket, data) {
      relay.written += data.length;
      return socket.write(data);
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  relay.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return relay;
}

/** The status line's code of an HTTP answer in `text` (the first one that is not 1xx), or 0. */
export function finalStatus(text: string): number {
  for (const m of text.matchAll(/HTTP\/1\.1 (\d{3})/g)) {
    const code = Number(m[1]);
    if (code >= 200) return code;
  }
  return 0;
}

/** The JSON body after the first final answer's head, parsed. */
export function answerJson(text: string): { error: { code: string; message: string; type: string } } {
  const start = text.indexOf('{', text.indexOf('\r\n\r\n'));
  return JSON.parse(text.slice(start)) as { error: { code: string; message: string; type: string } };
}

/**
 * Raises this process's own soft descriptor limit to at least `n` (up to its hard limit), so that
 * the test process can hold the sockets it floods with. Throws, saying what to do, when it cannot.
 */
export function ensureOwnDescriptors(n: number): void {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  if (!m || m[1] === 'unlimited' || Number(m[1]) >= n) return;
  const hard = m[2] === 'unlimited' ? Infinity : Number(m[2]);
  if (hard < n) throw new Error(`this test needs ${n} descriptors; the hard limit is ${hard}: raise it (ulimit -Hn ${n})`);
  execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${m[2]}`]);
}
