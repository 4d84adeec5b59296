/**
 * A TCP proxy on loopback in front of a server (a database), that a test can cut (every
 * connection reset, new ones refused), freeze (connections accepted, nothing passes: a
 * black hole, as a network partition looks) or stall (the connections open now pass nothing,
 * new ones pass: a firewall or NAT that lost its state for the flows it had), then restore.
 */
import net, { type AddressInfo, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): void;
  freeze(): void;
  stall(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  let mode: 'pass' | 'cut' | 'freeze' = 'pass';
  const open = new Set<Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => {});
    if (mode === 'cut') return void client.resetAndDestroy();
    if (mode === 'freeze') return; // held open, never answered
    const upstream = net.connect(targetPort, targetHost);
    open.add(upstream);
    upstream.on('close', () => open.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const killAll = (): void => {
    for (const s of open) s.resetAndDestroy();
    open.clear();
  };
  return {
    port: (server.address() as AddressInfo).port,
    cut() {
      mode = 'cut';
      killAll();
    },
    freeze() {
      mode = 'freeze';
      // Existing connections stop passing bytes too.
      for (const s of open) s.pause();
    },
    stall() {
      // Neither end sees anything more from the other, not even a close.
      for (const s of open) {
        s.pause();
        s.removeAllListeners('close');
        s.unpipe();
      }
    },
    restore() {
      mode = 'pass';
      killAll();
    },
    close: () =>
      new Promise<void>((resolve) => {
        killAll();
        server.close(() => resolve());
      }),
  };
}
