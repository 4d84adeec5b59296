import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { chat } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { consoleKey, createRelayDb, type RelayDbFixture } from '../support/relay-db.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

describe("outages of the relay's database and of Redis are told apart", () => {
  let fx: RelayDbFixture;
  let pgProxy: TcpProxy;
  let redisProxy: TcpProxy;
  let h: Harness;
  const logs = capturedLog();
  const lines = logs.lines;

  beforeAll(async () => {
    fx = await createRelayDb('postgres');
    const pgUrl = new URL(fx.dsn);
    pgProxy = await startTcpProxy('127.0.0.1', Number(pgUrl.port || 5432));
    pgUrl.port = String(pgProxy.port);
    const redisUrl = new URL(inject('redisUrl'));
    redisProxy = await startTcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
    redisUrl.hostname = '127.0.0.1';
    redisUrl.port = String(redisProxy.port);
    h = await startHarness({
      store: 'redis',
      redisUrl: redisUrl.toString(),
      redisCommandTimeoutMs: 300,
      env: { SLUICE_RELAY_DB: pgUrl.toString() },
      file: { relayDb: { queryTimeoutMs: 300 } },
      log: logs.log,
    });
    // Ready: the relay's database was reached once.
    const user = await fx.addUser();
    expect((await chat(h.url, `sk-${(await fx.addToken(user)).key}`)).status).toBe(200);
  });
  afterAll(async () => {
    await h?.close();
    await pgProxy?.close();
    await redisProxy?.close();
    await fx?.drop();
  });

  /** An unseen key's answer while `proxy` is cut, with the metric and access line of its outcome. */
  async function unseenKeyWhileCut(proxy: TcpProxy, outcome: string) {
    const counted = async () => metricValue(await metricsText(h), 'sluice_requests_total', { family: 'chat', outcome });
    const before = await counted();
    proxy.cut();
    try {
      const r = await chat(h.url, `sk-${consoleKey()}`);
      const id = r.headers['x-oneapi-request-id'] as string;
      return { r, id, counted: (await counted())! - before!, line: lines.find((l) => l.msg === 'request' && l.reqId === id) };
    } finally {
      proxy.restore();
    }
  }

  it("the relay's database down: 503 store_unavailable to the client, relay_db_unavailable to operators", async () => {
    const db = await unseenKeyWhileCut(pgProxy, 'relay_db_unavailable');
    expect(db.r.status).toBe(503);
    expect(db.r.headers['retry-after']).toBe('1');
    expect(db.counted).toBe(1);
    expect(db.line).toMatchObject({ decision: 'relay_db_unavailable', status: 503 });
    expect(lines.some((l) => l.reqId === db.id && l.source === 'relay-db' && String(l.msg).startsWith('key source unreachable'))).toBe(true);

    const redis = await unseenKeyWhileCut(redisProxy, 'store_unavailable');
    expect(redis.r.status).toBe(503);
    expect(redis.r.headers['retry-after']).toBe('1');
    expect(redis.counted).toBe(1);
    expect(redis.line).toMatchObject({ decision: 'store_unavailable', status: 503 });
    // The client cannot tell them apart: the contract's one body, but for the request id.
    expect(db.r.text.replace(db.id, '<id>')).toBe(redis.r.text.replace(redis.id, '<id>'));
    expect(JSON.parse(db.r.text)).toMatchObject({ error: { code: 'store_unavailable', type: 'new_api_error' } });
  });
});
