/**
 * How many client connections the public listener holds at most. Every client connection is a
 * file descriptor, and a forwarded request needs a second one toward the relay: a process out of
 * descriptors can accept nobody and reach nothing (every call then fails as if the relay were
 * down). So the cap leaves room, below the process's descriptor limit (RLIMIT_NOFILE), for one
 * relay socket per client connection and for everything else sluice holds open.
 */
import { readFileSync } from 'node:fs';

/**
 * Descriptors kept for what is not a client connection or its relay socket: the relay agent's
 * idle keep-alive sockets (up to 256, src/forward/agent.ts), admin connections (capped at
 * ADMIN_MAX_CONNECTIONS), Redis connections, stdio, the config watcher, epoll and libuv's own.
 */
export const RESERVED_DESCRIPTORS = 512;

/** The admin listener's own cap: probes, scrapes and operators need few. */
export const ADMIN_MAX_CONNECTIONS = 128;

/**
 * The soft RLIMIT_NOFILE of this process (what `ulimit -n` says), from /proc/self/limits; null
 * where that file does not exist (not Linux) or says "unlimited".
 */
export function openFileLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  let text: string;
  try {
    text = read();
  } catch {
    return null;
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!m || m[1] === 'unlimited') return null;
  return Number(m[1]);
}

/** The most client connections `nofile` descriptors leave room for (each may hold a relay socket too). */
export function descriptorBound(nofile: number): number {
  return Math.max(1, Math.floor((nofile - RESERVED_DESCRIPTORS) / 2));
}

export interface ConnectionCap {
  /** Client connections the public listener accepts at most. */
  cap: number;
  /** The process's descriptor limit (null: unknown). */
  nofile: number | null;
  /** Set when the configured cap leaves no room below the descriptor limit (it is kept: the operator asked for it). */
  warning?: string;
}

/**
 * The configured cap (`server.maxConnections`), or by default the smaller of `fallback` (sized
 * to the memory limit) and what the descriptor limit leaves room for.
 */
export function connectionCap(configured: number | null, nofile: number | null, fallback: number): ConnectionCap {
  const bound = nofile === null ? null : descriptorBound(nofile);
  if (configured === null) return { cap: bound === null ? fallback : Math.min(fallback, bound), nofile };
  if (bound !== null && configured > bound) {
    return {
      cap: configured,
      nofile,
      warning:
        `server.maxConnections (${configured}) leaves no room below the descriptor limit (${nofile}): ` +
        `a relay socket per connection and ${RESERVED_DESCRIPTORS} more need at most ${bound} connections; ` +
        'past that, calls fail with 503 out_of_sockets. Raise the limit (ulimit -n) or lower the setting.',
    };
  }
  return { cap: configured, nofile };
}
