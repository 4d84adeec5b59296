/**
 * A TLS terminator in front of a plain port, as the ingress in front of sluice: clients that
 * insist on TLS (OpenAI's realtime clients always open `wss://`) reach sluice through it. Its
 * certificate (./tls/, 127.0.0.1 and localhost, self-signed, for tests only) is the one `CA`
 * names.
 */
import { readFileSync } from 'node:fs';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';

const dir = new URL('./tls/', import.meta.url);
/** The terminator's certificate, for a client's trusted CAs. */
export const CA = readFileSync(new URL('localhost.crt', dir));

export interface TlsTerminator {
  /** `https://127.0.0.1:<port>`. */
  url: string;
  close(): Promise<void>;
}

/** Accepts TLS on a free loopback port and pipes each connection to `port` in plain TCP. */
export async function startTlsTerminator(port: number): Promise<TlsTerminator> {
  const open = new Set<Socket>();
  const server = createServer({ key: readFileSync(new URL('localhost.key', dir)), cert: CA }, (client: TLSSocket) => {
    const plain = connect(port, '127.0.0.1');
    open.add(client);
    open.add(plain);
    const end = (): void => {
      client.destroy();
      plain.destroy();
    };
    // An end passes through (the pipes end the other side once its bytes are out); an error cuts both.
    for (const s of [client, plain]) {
      s.on('error', end);
      s.on('close', () => open.delete(s));
    }
    client.pipe(plain).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
