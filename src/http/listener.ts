/** Starting and stopping a listening server, as promises. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on `port` (0: any free one) and resolves with the port bound. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Stops accepting connections and closes the idle ones; resolves once every connection has closed. */
export function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
