/**
 * Local HTTP servers for unit tests, closed after each test: `useServers()` at the top of a test
 * file gives `listen` (a server on a free loopback port, its port returned) and `onClose` (anything
 * else the test opened, closed along with the servers).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';

export interface Servers {
  listen(handler: http.RequestListener): Promise<number>;
  onClose(close: () => void): void;
}

export function useServers(): Servers {
  const closers: Array<() => void> = [];
  afterEach(() => {
    for (const c of closers.splice(0)) c();
  });
  return {
    async listen(handler) {
      const server = http.createServer(handler);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      closers.push(() => {
        server.closeAllConnections();
        server.close();
      });
      return (server.address() as AddressInfo).port;
    },
    onClose(close) {
      closers.push(close);
    },
  };
}
