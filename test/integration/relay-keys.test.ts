/**
 * sluice in front of a relay whose keys live in the relay's own database (PostgreSQL, MariaDB,
 * SQLite): keys made in the console work at once, console changes are seen within the bound
 * while the key is in use, the free tier counts per relay user, and a database outage or a
 * wrong password has a defined answer. Real sockets, real databases, the relay stand-in.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startHarness, type Harness } from '../support/harness.js';
import { metricsText, metricValue } from '../support/helpers.js';
import { chat } from '../support/http.js';
import { capturedLog } from '../support/log.js';
import { consoleKey, createRelayDb, DIALECTS, type RelayDbFixture } from '../support/relay-db.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { eventually, sleep } from '../support/time.js';

async function limitsOf(h: Harness, user: string | number): Promise<{ freeTier: { user: string; window: { used: number }; day: { used: number } } }> {
  const r = await fetch(`${h.adminUrl}/admin/users/${user}/limits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return (await r.json()) as { freeTier: { user: string; window: { used: number }; day: { used: number } } };
}

describe.each(DIALECTS)('sluice in front of a relay whose keys are in its %s database', (dialect) => {
  let fx: RelayDbFixture;
  let h: Harness;
  let logs: ReturnType<typeof capturedLog>;
  let user: number;

  beforeAll(async () => {
    fx = await createRelayDb(dialect);
    logs = capturedLog('debug');
    // A first lookup on a loaded CI machine (the SQLite worker starting, the schema read) may take seconds; the bound is not what this file tests.
    h = await startHarness({ store: 'redis', env: { SLUICE_RELAY_DB: fx.dsn }, file: { relayDb: { recheckSeconds: 1, queryTimeoutMs: 10_000 } }, log: logs.log });
    user = await fx.addUser();
  });
  afterAll(async () => {
    await h?.close();
    await fx?.drop();
  });

  it('forwards a call made with a key from the console on its first use, with or without sk-, as the client sent it (the relay strips sk- itself)', async () => {
    const t = await fx.addToken(user);
    for (const key of [`sk-${t.key}`, t.key]) {
      const r = await chat(h.url, key);
      expect(r.status).toBe(200);
      expect(h.relay.requests.at(-1)!.headers.authorization).toBe(`Bearer ${key}`);
    }
  });

  it("answers a key the relay would refuse with the contract's 401, without forwarding it or counting it", async () => {
    const disabled = await fx.addToken(user, { status: 2 });
    const noQuota = await fx.addToken(user, { remain_quota: 0 });
    const before = h.relay.started;
    const usedBefore = (await limitsOf(h, user)).freeTier.day.used;
    for (const t of [disabled, noQuota]) {
      const r = await chat(h.url, `sk-${t.key}`, { model: 'vend-flash-free' });
      expect(r.status).toBe(401);
      expect(JSON.parse(r.text)).toMatchObject({ error: { code: '', type: 'new_api_error' } });
    }
    expect(h.relay.started).toBe(before);
    expect((await limitsOf(h, user)).freeTier.day.used).toBe(usedBefore);
  });

  it("counts the free tier per relay user over all of that user's tokens, and the admin API answers for the user id", async () => {
    const u = await fx.addUser();
    const a = await fx.addToken(u);
    const b = await fx.addToken(u);
    const statuses: number[] = [];
    for (let i = 0; i < 21; i++) statuses.push((await chat(h.url, `sk-${i % 2 ? a.key : b.key}`, { model: 'vend-flash-free' })).status);
    expect(statuses.slice(0, 20).every((s) => s === 200)).toBe(true);
    expect(statuses[20]).toBe(429);
    expect((await limitsOf(h, u)).freeTier).toMatchObject({ user: String(u), window: { used: 20 }, day: { used: 20 } });
  });

  it('stops a key within the recheck bound once the console deletes, disables or expires it, or disables its user, while it is in use', async () => {
    const otherUser = await fx.addUser();
    const tokens = {
      deleted: await fx.addToken(user),
      disabled: await fx.addToken(user),
      expired: await fx.addToken(user),
      drained: await fx.addToken(user),
      userDisabled: await fx.addToken(otherUser),
    };
    for (const t of Object.values(tokens)) expect((await chat(h.url, `sk-${t.key}`)).status).toBe(200);
    const changedAt = Date.now();
    await fx.deleteToken(tokens.deleted.id);
    await fx.setToken(tokens.disabled.id, { status: 2 });
    await fx.setToken(tokens.expired.id, { expired_time: Math.floor(Date.now() / 1000) - 1 });
    await fx.setToken(tokens.drained.id, { remain_quota: 0 });
    await fx.setUserStatus(otherUser, 2);
    const stoppedAfter: Record<string, number> = {};
    await eventually(
      async () => {
        for (const [name, t] of Object.entries(tokens)) {
          if (name in stoppedAfter) continue;
          if ((await chat(h.url, `sk-${t.key}`)).status === 401) stoppedAfter[name] = Date.now() - changedAt;
        }
        expect(Object.keys(stoppedAfter).sort()).toEqual(Object.keys(tokens).sort());
      },
      { timeoutMs: 5000, intervalMs: 50 },
    );
    // recheckSeconds is 1: every change is seen within it (and the time a statement takes).
    for (const ms of Object.values(stoppedAfter)) expect(ms).toBeLessThan(1500);
  });

  it('does not trust an answer older than the bound for a key not in use: its next use asks again', async () => {
    const t = await fx.addToken(user);
    expect((await chat(h.url, `sk-${t.key}`)).status).toBe(200);
    await fx.setToken(t.id, { status: 2 });
    await sleep(1100);
    expect((await chat(h.url, `sk-${t.key}`)).status).toBe(401);
  });

  it("logs the relay's user id and token id for a call, never the key", async () => {
    const t = await fx.addToken(user);
    expect((await chat(h.url, `sk-${t.key}`)).status).toBe(200);
    await sleep(100);
    const line = logs.lines.findLast((l) => l.keyId === String(t.id));
    expect(line).toMatchObject({ user: String(user), keyId: String(t.id), decision: 'admitted' });
    expect(logs.text()).not.toContain(t.key);
  });

  it("keeps sluice's own registry beside the relay's keys; the relay's database wins for a key both hold", async () => {
    const own = await h.createKey('registry-user');
    expect((await chat(h.url, own.key)).status).toBe(200);
    // A key disabled in the relay's console that someone also imported into sluice's registry.
    const t = await fx.addToken(user, { status: 2 });
    await h.createKey('registry-user', { key: `sk-${t.key}` });
    expect((await chat(h.url, `sk-${t.key}`)).status).toBe(401);
  });
});

describe('relay database outage in the middle of traffic', () => {
  for (const dialect of ['postgres', 'mysql'] as const) {
    describe(dialect, () => {
      let fx: RelayDbFixture;
      let proxy: TcpProxy;
      let h: Harness;
      let known: string;
      let user: number;

      beforeAll(async () => {
        fx = await createRelayDb(dialect);
        const direct = dialect === 'postgres' ? new URL(fx.dsn) : null;
        proxy = await startTcpProxy('127.0.0.1', dialect === 'postgres' ? Number(direct!.port || 5432) : 3306);
        let dsn: string;
        if (direct) {
          direct.port = String(proxy.port);
          dsn = direct.toString();
        } else {
          dsn = fx.dsn.replace(/tcp\([^)]*\)/, `tcp(127.0.0.1:${proxy.port})`);
        }
        h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: dsn }, file: { relayDb: { recheckSeconds: 1, queryTimeoutMs: 300, staleSeconds: 60 } } });
        user = await fx.addUser();
        known = `sk-${(await fx.addToken(user)).key}`;
        expect((await chat(h.url, known)).status).toBe(200);
      });
      afterAll(async () => {
        await h?.close();
        await proxy?.close();
        await fx?.drop();
      });

      for (const fault of ['cut', 'freeze'] as const) {
        it(`when the database ${fault === 'cut' ? 'refuses connections' : 'stops answering'}: known keys keep working, unknown keys get 503 with Retry-After at once, readiness stays`, async () => {
          const fresh = `sk-${(await fx.addToken(user)).key}`;
          proxy[fault]();
          try {
            const until = Date.now() + 2500; // past the 1 s recheck bound: the stale period serves
            while (Date.now() < until) {
              expect((await chat(h.url, known)).status).toBe(200);
              await sleep(100);
            }
            const started = Date.now();
            const r = await chat(h.url, fresh);
            expect(r.status).toBe(503);
            expect(r.headers['retry-after']).toBeDefined();
            expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'store_unavailable' } });
            // Bounded by the query timeout (300 ms here), not hanging.
            expect(Date.now() - started).toBeLessThan(2000);
            const ready = await fetch(`${h.adminUrl}/readyz`);
            expect(ready.status).toBe(200);
            expect(await ready.json()).toMatchObject({ checks: { relayDb: { state: 'failing' } } });
            expect(metricValue(await metricsText(h), 'sluice_relay_db_up')).toBe(0); // what alerts watch
          } finally {
            proxy.restore();
          }
          await eventually(async () => expect((await chat(h.url, fresh)).status).toBe(200), { timeoutMs: 4000, intervalMs: 100 });
          expect(await (await fetch(`${h.adminUrl}/readyz`)).json()).toMatchObject({ checks: { relayDb: { state: 'ok' } } });
          expect(metricValue(await metricsText(h), 'sluice_relay_db_up')).toBe(1);
        });
      }
    });
  }
});

describe('a relay database sluice cannot use at start', () => {
  let fx: RelayDbFixture;
  beforeAll(async () => {
    fx = await createRelayDb('mysql');
  });
  afterAll(() => fx?.drop());

  it('with a wrong password: not ready, readiness says why, keys get 503, and the password is in no log line', async () => {
    const logs = capturedLog('debug');
    const dsn = fx.dsn.replace(/^([^:]*):[^@]*@/, '$1:Wr0ngPassw0rd-xyz@');
    const h = await startHarness({ store: 'memory', env: { SLUICE_RELAY_DB: dsn }, log: logs.log });
    try {
      const { status, body } = await eventually(
        async () => {
          const r = await fetch(`${h.adminUrl}/readyz`);
          const body = (await r.json()) as { status: string; checks: { relayDb: { state: string; error: string } } };
          return Boolean(body.checks.relayDb.error) && { status: r.status, body };
        },
        { timeoutMs: 5000, intervalMs: 100, what: 'readiness to say why' },
      );
      expect(status).toBe(503);
      expect(body.checks.relayDb).toMatchObject({ state: 'starting', error: expect.stringMatching(/Access denied/) });
      expect(metricValue(await metricsText(h), 'sluice_relay_db_up')).toBe(0); // not reached yet since start
      expect((await chat(h.url, `sk-${consoleKey()}`)).status).toBe(503);
      expect(JSON.stringify(body)).not.toContain('Wr0ngPassw0rd');
      expect(logs.text()).not.toContain('Wr0ngPassw0rd');
      expect(logs.lines.some((l) => String(l.msg).includes('relay database unreachable or unusable'))).toBe(true);
    } finally {
      await h.close();
    }
  });

  it('with a malformed address: start-up stops with exit code 78, naming the setting and not the password', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, SLUICE_UPSTREAM_URL: 'http://127.0.0.1:9', SLUICE_PORT: '0', SLUICE_ADMIN_PORT: '0', SLUICE_RELAY_DB: 'root:Sup3rSecret@tcp(db:3306' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(78);
    expect(stderr).toContain('SLUICE_RELAY_DB');
    expect(stderr).not.toContain('Sup3rSecret');
  });
});
