/**
 * Benchmark process: a raw TCP pipe to the relay (no HTTP parsing at all), used only as the floor
 * for the SSE timings: whatever a byte needs to cross one more process on this machine.
 * BENCH_UPSTREAM (URL).
 */
import net from 'node:net';
import { onStopSignal, requireEnv } from './common.js';

const upstream = new URL(requireEnv('BENCH_UPSTREAM'));
const conns = new Set<net.Socket>();
const server = net.createServer({ noDelay: true }, (client) => {
  const up = net.connect(Number(upstream.port), upstream.hostname);
  up.setNoDelay(true);
  conns.add(client);
  client.pipe(up);
  up.pipe(client);
  const end = (): void => {
    conns.delete(client);
    client.destroy();
    up.destroy();
  };
  client.on('error', end);
  up.on('error', end);
  client.on('close', end);
  up.on('close', end);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as net.AddressInfo;
  process.stdout.write(JSON.stringify({ ready: true, port, pid: process.pid }) + '\n');
});
onStopSignal(() => {
  for (const c of conns) c.destroy();
  server.close();
});
