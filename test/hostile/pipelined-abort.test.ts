/**
 * A client that pipelines requests behind a slow one and drops the connection. Node answers a
 * connection's requests in order and gives a response queued behind another no 'close' of its own
 * when the connection dies: sluice once never released what those requests held. An attacker
 * with any key (or none) raised sluice_inflight_requests without bound and, with bodies, kept the
 * bodies' budget spent until every large call from every user was answered 503.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { MAX_PIPELINED_REQUESTS } from '../../src/http/pipelining.js';
import { useHarness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { eventually, sleep } from '../support/time.js';

describe('pipelined requests on a connection that dies', () => {
  const h = useHarness({ store: 'memory' });

  it('release their count and their bodies once the connection is gone', async () => {
    const { key } = await h.createKey('pipeliner');
    const port = Number(new URL(h.url).port);
    const big = Buffer.concat([Buffer.from('{"model":"vend-flash","messages":[],"pad":"'), Buffer.alloc(8 * 1024 * 1024, 0x61), Buffer.from('"}')]);
    const head = (length: number) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    // JSON cut short: each answered 400 by sluice, queued behind the first answer.
    const cut = Buffer.from('{"model":"vend-flash","pad":"' + 'a'.repeat(256 * 1024));
    const wrongKeys = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-wrong\r\n\r\n'.repeat(200);
    for (let round = 0; round < 3; round++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.pause(); // reads nothing: the first answer cannot finish, everything after it queues
      await new Promise<void>((r) => s.once('connect', r));
      s.write(Buffer.concat([Buffer.from(head(big.length)), big]));
      for (let i = 0; i < 10; i++) s.write(Buffer.concat([Buffer.from(head(cut.length)), cut]));
      // A body declared 2 bytes longer than sent: it runs into the next request, the rest is no
      // HTTP, and Node drops the connection with the answers before it still queued.
      s.write(Buffer.concat([Buffer.from(head(cut.length + 2)), cut]));
      s.write(Buffer.concat([Buffer.from(head(cut.length)), cut]));
      s.write(wrongKeys);
      await sleep(400);
      s.destroy();
    }
    await eventually(
      async () => {
        const text = await metricsText(h);
        expect(metricValue(text, 'sluice_open_connections')).toBe(0);
        expect(metricValue(text, 'sluice_inflight_requests')).toBe(0);
        expect(metricValue(text, 'sluice_body_bytes')).toBe(0);
      },
      { timeoutMs: 10_000, what: 'the dead connections’ requests to be released' },
    );
  }, 30_000);

  it("forwards a connection's pipelined requests to the relay one at a time: one relay socket per connection", async () => {
    const { key } = await h.createKey('slow-pipeliner');
    const port = Number(new URL(h.url).port);
    h.relay.behave((r) => r.url === '/v1/models', { delayMs: 300 });
    try {
      const before = h.relay.started;
      const s = net.connect(port, '127.0.0.1');
      let answers = '';
      s.on('data', (c: Buffer) => (answers += c.toString('latin1')));
      await new Promise<void>((r) => s.once('connect', r));
      s.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`.repeat(6));
      // While the first waits on the relay, none of the five behind it has reached the relay.
      await sleep(200);
      expect(h.relay.started - before).toBe(1);
      await eventually(() => expect(answers.match(/HTTP\/1\.1 200 /g)?.length).toBe(6), { timeoutMs: 10_000, what: 'every pipelined answer' });
      expect(h.relay.started - before).toBe(6);
      s.destroy();
    } finally {
      h.relay.reset();
    }
  }, 30_000);

  it('never forwards a pipelined request still waiting its turn when its connection dies', async () => {
    const { key } = await h.createKey('dying-pipeliner');
    const port = Number(new URL(h.url).port);
    h.relay.behave((r) => r.url === '/v1/models', { delayMs: 300 });
    try {
      const before = h.relay.started;
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      await new Promise<void>((r) => s.once('connect', r));
      s.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`.repeat(4));
      await sleep(100);
      s.destroy();
      await eventually(async () => expect(metricValue(await metricsText(h), 'sluice_inflight_requests')).toBe(0), { what: 'its requests to be released' });
      // Past the first one's relay delay: the three waiting behind it never reached the relay.
      await sleep(400);
      expect(h.relay.started - before).toBe(1);
    } finally {
      h.relay.reset();
    }
  });

  it('closes a connection with more requests in progress than MAX_PIPELINED_REQUESTS; one within it is answered in full', async () => {
    const { key } = await h.createKey('deep-pipeliner');
    const port = Number(new URL(h.url).port);
    const call = `GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`;

    // Within the bound: every answer arrives, in order, on the one connection.
    const within = net.connect(port, '127.0.0.1');
    let answers = '';
    within.on('data', (c: Buffer) => (answers += c.toString('latin1')));
    within.write(call.repeat(MAX_PIPELINED_REQUESTS));
    await eventually(() => expect(answers.match(/HTTP\/1\.1 200 /g)?.length).toBe(MAX_PIPELINED_REQUESTS), { what: 'every pipelined answer' });
    within.destroy();

    // 5,000 on one connection at once: sluice closes it, having handled no more than the bound.
    const before = h.relay.started;
    const deep = net.connect(port, '127.0.0.1');
    deep.on('error', () => {});
    deep.resume(); // answers read and dropped, so that the close is seen
    const closed = new Promise<void>((r) => deep.once('close', () => r()));
    await new Promise<void>((r) => deep.once('connect', r));
    deep.write(call.repeat(5000));
    await closed;
    expect(h.relay.started - before).toBeLessThanOrEqual(MAX_PIPELINED_REQUESTS);
    expect(metricValue(await metricsText(h), 'sluice_pipelining_closed_total')).toBe(1);
    await eventually(async () => expect(metricValue(await metricsText(h), 'sluice_inflight_requests')).toBe(0), { what: 'its requests to be released' });
    // Others are served as before.
    const r = await fetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(r.status).toBe(200);
  }, 30_000);
});
