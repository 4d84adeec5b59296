/**
 * A client that asks for a large answer and reads none of it (or reads it slowly): sluice must
 * hold back the relay, not read the relay's answer into its own memory on the client's behalf.
 * The Forwarder pipes the relay's body by hand (src/forward/proxy.ts: onRelayData pauses the relay
 * response when the client's socket is full, onClientDrain resumes it). The relay here writes as
 * fast as its socket takes bytes and counts what it wrote: with the pipe's back-pressure it stalls
 * after the sockets' buffers fill; without it, it would hand sluice the whole answer in a second.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { sleep } from '../support/time.js';

const CHUNK = 64 * 1024;
/** The answer's size: far above what the sockets between relay, sluice and client hold. */
const TOTAL = 192 * 1024 * 1024;

/** The byte at `offset` of every answer: a pattern the client's copy is checked against. */
function chunkAt(offset: number): Buffer {
  const b = Buffer.allocUnsafe(CHUNK);
  for (let i = 0; i < CHUNK; i += 4) b.writeUInt32LE((offset + i) >>> 2, i);
  return b;
}

function expectedDigest(): string {
  const h = createHash('sha256');
  for (let off = 0; off < TOTAL; off += CHUNK) h.update(chunkAt(off));
  return h.digest('hex');
}

interface FloodRelay {
  url: string;
  /** Bytes the relay's answer has handed to its socket so far. */
  written: number;
  close(): Promise<void>;
}

/** A relay answering every request with TOTAL bytes, written as fast as its socket accepts them. */
async function floodRelay(contentType: string): Promise<FloodRelay> {
  const relay: FloodRelay = { url: '', written: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': contentType, 'content-length': String(TOTAL) });
    const pump = (): void => {
      while (relay.written < TOTAL) {
        const ok = res.write(chunkAt(relay.written));
        relay.written += CHUNK;
        if (!ok) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  relay.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  relay.close = () => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  };
  return relay;
}

describe.each(['application/octet-stream', 'text/event-stream'])('a client that does not read a large %s answer', (contentType) => {
  let relay: FloodRelay;
  let h: Harness;
  let key: string;

  beforeAll(async () => {
    relay = await floodRelay(contentType);
    h = await startHarness({ store: 'memory', env: { SLUICE_UPSTREAM_URL: relay.url } });
    key = (await h.createKey('slow-reader')).key;
  });
  afterAll(async () => {
    await h.close();
    await relay.close();
  });

  it('holds the relay back until it reads, then gets every byte in order', async () => {
    const port = Number(new URL(h.url).port);
    const client = net.connect(port, '127.0.0.1');
    client.pause(); // reads nothing: the kernel's receive buffer fills, then sluice's socket
    await new Promise<void>((r) => client.once('connect', r));
    const body = '{"model":"gpt-4o","messages":[]}';
    client.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );

    // The relay writes into the sockets' buffers, then stalls: what it managed is bounded by them
    // (each a few MB on loopback), not by the answer's size.
    await sleep(1500);
    const stalledAt = relay.written;
    await sleep(1000);
    expect(relay.written).toBe(stalledAt);
    expect(stalledAt).toBeGreaterThan(0);
    expect(stalledAt).toBeLessThan(48 * 1024 * 1024);

    // Reading now, the client gets the answer whole and in order.
    const received = await new Promise<{ head: string; digest: string; bytes: number }>((resolve, reject) => {
      const hash = createHash('sha256');
      let head: string | null = null;
      let pending = Buffer.alloc(0);
      let bytes = 0;
      client.on('data', (c: Buffer) => {
        if (head === null) {
          pending = Buffer.concat([pending, c]);
          const end = pending.indexOf('\r\n\r\n');
          if (end === -1) return;
          head = pending.subarray(0, end).toString('latin1');
          c = pending.subarray(end + 4);
        }
        hash.update(c);
        bytes += c.length;
        if (bytes >= TOTAL) {
          client.destroy();
          resolve({ head, digest: hash.digest('hex'), bytes });
        }
      });
      client.on('error', reject);
      client.on('close', () => reject(new Error(`closed after ${bytes} of ${TOTAL} bytes`)));
      client.resume();
    });
    expect(received.head).toMatch(/^HTTP\/1\.1 200 /);
    expect(received.head.toLowerCase()).toContain(`content-length: ${TOTAL}`);
    expect(received.bytes).toBe(TOTAL);
    expect(received.digest).toBe(expectedDigest());
    expect(relay.written).toBe(TOTAL);
  }, 60_000);
});
