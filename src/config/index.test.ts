import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOC_PATH, renderDoc } from '../../scripts/config-docs.js';
import { buildConfig, DEFAULT_IP_LIMITS, DEFAULTS, ENV_VARS, loadConfig, publicConfig } from './index.js';
import { STARTUP_ONLY } from './schema.js';

const ENV = { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000' };

describe('config', () => {
  it('has the contract as its defaults', () => {
    const c = buildConfig({}, ENV);
    expect(c.port).toBe(8080);
    expect(c.adminPort).toBe(9090);
    expect(c.maxBodyBytes).toBe(32 * 1024 * 1024);
    expect(c.freeTier).toEqual({
      perMinute: 20,
      windowSeconds: 60,
      perDay: 100,
      timeZone: 'Asia/Shanghai',
      modelSuffix: '-free',
      models: null,
      pinnedChannels: 'all',
      shadow: false,
    });
    expect(c.drainSeconds).toBe(30);
    expect(c.accessLog).toBe('all');
    expect(c.limits.onStoreError).toBe('open');
    expect(c.limits.rememberRefusalsSeconds).toBe(10);
    expect(c.redis).toMatchObject({ keyPrefix: 'sluice:', commandTimeoutMs: 100, sentinels: null, clusterNodes: null, batchDecisions: true });
    expect(c.ipLimits).toEqual(DEFAULT_IP_LIMITS);
    expect(c.trustedProxies).toEqual([]);
    expect(c.redis.url).toBeNull();
    expect(c.upstream.credential).toBeNull();
  });

  it('takes the documented config file (docs/configuration.md) as valid, and as exactly the defaults', () => {
    const page = readFileSync(DOC_PATH, 'utf8');
    const block = /## Config file\n\n[^\n]*\n\n```yaml\n([\s\S]*?)```/.exec(page)?.[1];
    expect(block).toBeDefined();
    const documented = buildConfig(parseYaml(block!) as Record<string, unknown>, ENV);
    expect(documented).toEqual(buildConfig({}, ENV));
  });

  it('has docs/configuration.md generated from the schema as it is now', () => {
    const page = readFileSync(DOC_PATH, 'utf8');
    expect(renderDoc(page), 'docs/configuration.md is stale: run npm run docs:config').toBe(page);
  });

  it('reads the environment variables it always read, and no others', () => {
    expect(Object.keys(ENV_VARS).sort()).toEqual(
      [
        'SLUICE_CONFIG',
        'SLUICE_UPSTREAM_URL',
        'SLUICE_UPSTREAM_CREDENTIAL',
        'SLUICE_REDIS_URL',
        'SLUICE_REDIS_SENTINELS',
        'SLUICE_REDIS_SENTINEL_NAME',
        'SLUICE_REDIS_CLUSTER_NODES',
        'SLUICE_RELAY_DB',
        'SLUICE_RELAY_DB_SCHEMA',
        'SLUICE_DRAIN_SECONDS',
        'SLUICE_DRAIN_DIR',
        'SLUICE_HOST',
        'SLUICE_PORT',
        'SLUICE_ADMIN_HOST',
        'SLUICE_ADMIN_PORT',
        'SLUICE_ADMIN_TOKEN',
        'SLUICE_LOG_LEVEL',
        'SLUICE_ACCESS_LOG',
        'SLUICE_MAX_CONNECTIONS',
      ].sort(),
    );
    const c = buildConfig(
      {},
      {
        ...ENV,
        SLUICE_UPSTREAM_CREDENTIAL: 'cred',
        SLUICE_REDIS_URL: 'redis://h:1',
        SLUICE_REDIS_SENTINELS: 'a:1, b:2',
        SLUICE_REDIS_SENTINEL_NAME: 'm',
        SLUICE_RELAY_DB: 'sqlite:/tmp/relay.db',
        SLUICE_RELAY_DB_SCHEMA: 'one-api',
        SLUICE_DRAIN_SECONDS: '5',
        SLUICE_DRAIN_DIR: '/sluice-drain',
        SLUICE_HOST: '127.0.0.1',
        SLUICE_ADMIN_HOST: '127.0.0.2',
        SLUICE_ADMIN_PORT: '9999',
        SLUICE_ADMIN_TOKEN: 't'.repeat(16),
        SLUICE_LOG_LEVEL: 'warn',
      },
    );
    expect([c.upstream.credential, c.redis.url, c.redis.sentinels, c.redis.sentinelName, c.relayDb.dsn?.dialect, c.relayDb.schema]).toEqual([
      'cred',
      'redis://h:1',
      ['a:1', 'b:2'],
      'm',
      'sqlite',
      'one-api',
    ]);
    expect([c.drainSeconds, c.drainDir]).toEqual([5, '/sluice-drain']);
    expect([c.drainSeconds, c.host, c.adminHost, c.adminPort, c.adminToken, c.logLevel]).toEqual([5, '127.0.0.1', '127.0.0.2', 9999, 't'.repeat(16), 'warn']);
    expect(buildConfig({}, { ...ENV, SLUICE_REDIS_URL: 'redis://h:1', SLUICE_REDIS_CLUSTER_NODES: 'a:1' }).redis.clusterNodes).toEqual(['a:1']);
  });

  it('keeps the defaults the schema has always had', () => {
    expect(DEFAULTS.server).toEqual({ maxConnections: null, headersTimeoutSeconds: 15, requestTimeoutSeconds: 300, keepAliveTimeoutSeconds: 65 });
    expect(DEFAULTS.upstream).toEqual({ credential: null, headersTimeoutSeconds: 600, idleTimeoutSeconds: 600 });
    expect(DEFAULTS.relayDb).toEqual({ url: null, schema: 'auto', poolSize: 2, queryTimeoutMs: 2000, recheckSeconds: 10, staleSeconds: 900 });
    expect(DEFAULTS.redis).toEqual({ url: null, keyPrefix: 'sluice:', commandTimeoutMs: 100, sentinels: null, sentinelName: null, clusterNodes: null, batchDecisions: true });
    expect([DEFAULTS.host, DEFAULTS.port, DEFAULTS.adminHost, DEFAULTS.adminPort, DEFAULTS.adminToken, DEFAULTS.logLevel]).toEqual([
      '0.0.0.0',
      8080,
      '0.0.0.0',
      9090,
      null,
      'info',
    ]);
    expect(Object.isFrozen(DEFAULTS.freeTier)).toBe(true);
  });

  it('names the start-up-only settings from the schema, the admin token as a secret', () => {
    expect(STARTUP_ONLY.map((s) => [s.path, s.secret])).toEqual([
      ['upstream.url', false],
      ['redis', false],
      ['relayDb', false],
      ['host', false],
      ['port', false],
      ['adminHost', false],
      ['adminPort', false],
      ['adminToken', true],
      ['drainDir', false],
    ]);
  });

  it('shows no secret in the public config: a set secret as [redacted], an unset one as null', () => {
    const c = buildConfig(
      { upstream: { credential: 'sk-secret-credential' } },
      {
        SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000/relay',
        SLUICE_ADMIN_TOKEN: 'admin-token-secret-0123',
        SLUICE_REDIS_URL: 'redis://:redispw@127.0.0.1:6379/2',
        SLUICE_RELAY_DB: 'postgres://u:dbpw@db:5432/newapi',
      },
    );
    const p = publicConfig(c) as { upstream: { url: string; credential: string }; redis: { url: string }; relayDb: Record<string, unknown> };
    expect(JSON.stringify(p)).not.toMatch(/redispw|dbpw|secret/);
    expect([p.upstream.url, p.upstream.credential, p.redis.url, p.relayDb.url]).toEqual(['http://127.0.0.1:3000/relay', '[redacted]', '[redacted]', '[redacted]']);
    // The file's key, not the parsed address; the admin token is not a key of the file.
    expect(p.relayDb).not.toHaveProperty('dsn');
    expect(p).not.toHaveProperty('adminToken');
    expect(publicConfig(buildConfig({}, ENV))).toMatchObject({ upstream: { url: 'http://127.0.0.1:3000/', credential: null }, redis: { url: null }, relayDb: { url: null } });
  });

  it('round-trips: the printed config, saved as a file with the secrets given again, gives the same config', () => {
    const secrets = {
      SLUICE_UPSTREAM_CREDENTIAL: 'sk-secret-credential',
      SLUICE_REDIS_URL: 'redis://:redispw@127.0.0.1:6379/2',
      SLUICE_RELAY_DB: 'u:dbpw@tcp(db:3306)/newapi?parseTime=True',
    };
    const file = {
      upstream: { url: 'http://127.0.0.1:3000', headersTimeoutSeconds: 0 },
      redis: { keyPrefix: 'x:', sentinels: 'a:1,b:2', sentinelName: 'm' },
      relayDb: { schema: 'new-api', poolSize: 3 },
      freeTier: { models: ['a-free', 'b-free'] },
      ipLimits: [{ name: 'one', paths: ['/api/*'], limit: 5, windowSeconds: 60 }],
      trustedProxies: ['10.0.0.0/8'],
    };
    const env = { ...secrets, SLUICE_ADMIN_TOKEN: 'admin-token-secret-0123' };
    const first = buildConfig(file, env);
    const printed = JSON.parse(JSON.stringify(publicConfig(first))) as Record<string, unknown>;
    const second = buildConfig(parseYaml(stringifyYaml(printed)) as Record<string, unknown>, env);
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    expect(publicConfig(second)).toEqual(publicConfig(first));
    // Without the secrets the placeholder is refused, naming where it is, not taken for a value.
    expect(() => buildConfig(printed, { SLUICE_REDIS_URL: secrets.SLUICE_REDIS_URL, SLUICE_RELAY_DB: secrets.SLUICE_RELAY_DB })).toThrow(
      /upstream\.credential holds "\[redacted\]", the placeholder a printed config shows for a secret/,
    );
  });

  it('bounds bodies, connections and waits by default, sized to the shipped memory limit', () => {
    const c = buildConfig({}, ENV);
    expect(c.bodyBudgetBytes).toBe(64 * 1024 * 1024);
    expect(c.maxDecodedBodyBytes).toBe(8 * 1024 * 1024);
    expect(c.server).toEqual({ maxConnections: null, headersTimeoutSeconds: 15, requestTimeoutSeconds: 300, keepAliveTimeoutSeconds: 65 });
    expect(c.upstream.headersTimeoutSeconds).toBe(600);
    expect(buildConfig({ upstream: { headersTimeoutSeconds: 0 } }, ENV).upstream.headersTimeoutSeconds).toBe(0);
  });

  it('takes server.maxConnections from the file, and SLUICE_MAX_CONNECTIONS over it', () => {
    expect(buildConfig({ server: { maxConnections: 300 } }, ENV).server.maxConnections).toBe(300);
    expect(buildConfig({ server: { maxConnections: 300 } }, { ...ENV, SLUICE_MAX_CONNECTIONS: '500' }).server.maxConnections).toBe(500);
  });

  it('takes accessLog from the file, and SLUICE_ACCESS_LOG over it', () => {
    expect(buildConfig({ accessLog: 'errors' }, ENV).accessLog).toBe('errors');
    expect(buildConfig({ accessLog: 'errors' }, { ...ENV, SLUICE_ACCESS_LOG: 'off' }).accessLog).toBe('off');
  });

  it('reads a key set to null as a key left out', () => {
    const c = buildConfig({ redis: { url: null, sentinels: null }, freeTier: { models: null, shadow: null }, upstream: { credential: null } }, ENV);
    expect(c).toEqual(buildConfig({}, ENV));
  });

  it('refuses to start without SLUICE_UPSTREAM_URL, saying so', () => {
    expect(() => buildConfig({}, {})).toThrow(/SLUICE_UPSTREAM_URL is required/);
  });

  it.each([
    [{ bogus: 1 }, /unknown config key "bogus"/],
    [{ freeTier: { perMinute: 0 } }, /"freeTier.perMinute" must be an integer/],
    [{ freeTier: { perMinut: 5 } }, /unknown config key "freeTier.perMinut"/],
    [{ redis: { url: 'redis://127.0.0.1:6379/cache' } }, /"redis.url" must name a database number after the host/],
    [{ freeTier: { pinnedChannels: 'some' } }, /"freeTier.pinnedChannels" must be "all" or a list of channel ids, got "some"/],
    [{ freeTier: { pinnedChannels: 7 } }, /"freeTier.pinnedChannels" must be a list of channel ids/],
    [{ freeTier: { pinnedChannels: [7, 0] } }, /"freeTier.pinnedChannels\[1\]" must be an integer between 1 and/],
    [{ freeTier: { timeZone: 'Mars/Olympus' } }, /"freeTier.timeZone" is not a known IANA time zone/],
    [{ freeTier: { modelSuffix: '-free', models: ['a'] } }, /exclusive/],
    [{ maxBodyBytes: '12MB' }, /"maxBodyBytes" must be an integer/],
    [{ trustedProxies: ['10.0.0.0/33'] }, /"trustedProxies\[0\]" has an invalid prefix length/],
    [{ trustedProxies: 'x' }, /"trustedProxies" must be a list/],
    [{ ipLimits: [{ name: 'a', paths: ['api/*'], limit: 1, windowSeconds: 1 }] }, /"ipLimits\[0\].paths\[0\]" must start with "\/"/],
    [{ ipLimits: [{ name: 'a', paths: ['/a*b'], limit: 1, windowSeconds: 1 }] }, /"ipLimits\[0\].paths\[0\]" may hold "\*" only at its end/],
    [{ ipLimits: [{ name: 'a', paths: ['/a'], limit: -1, windowSeconds: 1 }] }, /"ipLimits\[0\].limit"/],
    [{ ipLimits: [{ name: 'a', paths: ['/a'], limit: 1, windowSeconds: 1, extra: 1 }] }, /unknown config key "ipLimits\[0\].extra"/],
    [{ upstream: { credential: 5 } }, /"upstream.credential" must be a non-empty string/],
    [{ logLevel: 'loud' }, /"logLevel" must be one of/],
    [{ accessLog: 'some' }, /"accessLog" must be one of all, errors, off/],
    [{ accessLog: true }, /"accessLog" must be one of all, errors, off, got true/],
    [{ limits: { onStoreError: 'maybe' } }, /"limits.onStoreError" must be "open" or "closed"/],
    [{ limits: { rememberRefusalsSeconds: -1 } }, /limits.rememberRefusalsSeconds/],
    [{ limits: { rememberRefusalsSeconds: 3601 } }, /limits.rememberRefusalsSeconds/],
    [{ limits: { rememberRefusalsSeconds: 'long' } }, /limits.rememberRefusalsSeconds/],
    [{ freeTier: { shadow: 'yes' } }, /"freeTier.shadow" must be true or false/],
    [{ redis: { keyPrefix: 'a{b' } }, /"redis.keyPrefix" must not contain/],
    [{ redis: { batchDecisions: 'sometimes' } }, /"redis.batchDecisions" must be true or false/],
    [{ redis: { sentinels: ['h:1'] } }, /"redis.sentinelName" is required/],
    [{ redis: { clusterNodes: ['nope'] } }, /"redis.clusterNodes\[0\]" must be host:port/],
    [{ drainSeconds: -1 }, /"drainSeconds" must be an integer/],
    [{ bodyBudgetBytes: 0 }, /"bodyBudgetBytes" must be an integer/],
    [{ bodyBudgetBytes: 1024 * 1024 }, /"bodyBudgetBytes" \(1048576\) must be at least "maxBodyBytes" \(33554432\)/],
    [{ maxBodyBytes: 1024, maxDecodedBodyBytes: 4096, bodyBudgetBytes: 2048 }, /"bodyBudgetBytes" \(2048\) must be at least "maxDecodedBodyBytes"/],
    [{ maxDecodedBodyBytes: '8MB' }, /"maxDecodedBodyBytes" must be an integer/],
    [{ server: { maxConnections: 0 } }, /"server.maxConnections" must be an integer between 1/],
    [{ server: { headersTimeoutSeconds: 0 } }, /"server.headersTimeoutSeconds"/],
    [{ server: { headersTimeoutSeconds: 30, requestTimeoutSeconds: 20 } }, /"server.headersTimeoutSeconds" \(30\) must not exceed "server.requestTimeoutSeconds" \(20\)/],
    [{ server: { keepAliveTimeoutSeconds: 'long' } }, /"server.keepAliveTimeoutSeconds"/],
    [{ server: { idleSeconds: 1 } }, /unknown config key "server.idleSeconds"/],
    [{ server: 5 }, /"server" must be a mapping/],
    [{ upstream: { headersTimeoutSeconds: -1 } }, /"upstream.headersTimeoutSeconds" must be an integer between 0/],
  ])('rejects %j naming the key', (file, msg) => {
    expect(() => buildConfig(file as Record<string, unknown>, ENV)).toThrow(msg);
  });

  it.each([
    [{ SLUICE_PORT: 'eighty' }, /"SLUICE_PORT" must be an integer/],
    [{ SLUICE_REDIS_URL: 'http://x' }, /"SLUICE_REDIS_URL" must be a redis:\/\/ or rediss:\/\//],
    [{ SLUICE_UPSTREAM_URL: 'ftp://x' }, /"SLUICE_UPSTREAM_URL" must be an http/],
    [{ SLUICE_UPSTREAM_URL: 'http://u:relaypw@relay:3000' }, /"SLUICE_UPSTREAM_URL" must not hold a user or password: sluice never sends them to the relay/],
    [{ SLUICE_UPSTREAM_URL: 'http://token@relay:3000' }, /"SLUICE_UPSTREAM_URL" must not hold a user or password/],
    [{ SLUICE_UPSTREAM_URL: 'http://relay:3000/?key=abc' }, /"SLUICE_UPSTREAM_URL" must not hold a query or a fragment/],
    [{ SLUICE_UPSTREAM_URL: 'http://relay:3000/#x' }, /"SLUICE_UPSTREAM_URL" must not hold a query or a fragment/],
    [{ SLUICE_ADMIN_TOKEN: 'short' }, /SLUICE_ADMIN_TOKEN must be at least 16/],
    [{ SLUICE_ACCESS_LOG: 'most' }, /"SLUICE_ACCESS_LOG" must be one of all, errors, off/],
    [{ SLUICE_MAX_CONNECTIONS: 'many' }, /"SLUICE_MAX_CONNECTIONS" must be an integer/],
  ])('rejects environment %j naming the variable', (env, msg) => {
    expect(() => buildConfig({}, { ...ENV, ...env })).toThrow(msg);
  });

  it.each([
    [{ upstream: { credential: 98765432101234 } }, ENV],
    [{ upstream: { credential: ['S3cretPass42'] } }, ENV],
    [{ upstream: { credential: { S3cretPass42: 'x' } } }, ENV],
    [{ upstream: { url: 'http://u:S3cretPass42@[bad' } }, {}],
    [{}, { SLUICE_UPSTREAM_URL: 'http://u:S3cretPass42@[bad' }],
    [{ upstream: { url: 'http://u:S3cretPass42@relay:3000' } }, {}],
    [{ upstream: { url: 'http://relay:3000/?key=S3cretPass42' } }, {}],
    [{}, { SLUICE_UPSTREAM_URL: 'http://relay:99999/v1?key=S3cretPass42' }],
    [{ redis: { sentinels: ['redis://:S3cretPass42@sentinel:26379'] } }, ENV],
    [{}, { ...ENV, SLUICE_REDIS_CLUSTER_NODES: 'redis://:S3cretPass42@node:6379' }],
  ])('refuses %j %j without repeating the secret it may hold', (file, env) => {
    let message = '';
    try {
      buildConfig(file, env);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/config key|SLUICE_/);
    expect(message).not.toContain('S3cretPass42');
    expect(message).not.toMatch(/98765432101234/);
  });

  it('reads a YAML file named by SLUICE_CONFIG, and the environment wins', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-cfg-'));
    const file = join(dir, 'config.yaml');
    writeFileSync(file, 'port: 7000\nadminPort: 7001\nfreeTier:\n  perMinute: 5\n  models: [a-free, b]\nupstream:\n  url: http://relay:3000\n');
    const c = loadConfig({ SLUICE_CONFIG: file, SLUICE_PORT: '7100' });
    expect(c.port).toBe(7100);
    expect(c.adminPort).toBe(7001);
    expect(c.freeTier.perMinute).toBe(5);
    expect(c.freeTier.models).toEqual(['a-free', 'b']);
    expect(c.upstream.url.href).toBe('http://relay:3000/');
    writeFileSync(file, '{"maxBodyBytes": 1024}');
    expect(loadConfig({ ...ENV, SLUICE_CONFIG: file }).maxBodyBytes).toBe(1024);
    writeFileSync(file, 'port: [unclosed');
    expect(() => loadConfig({ ...ENV, SLUICE_CONFIG: file })).toThrow(/not valid YAML/);
    expect(() => loadConfig({ ...ENV, SLUICE_CONFIG: join(dir, 'missing.yaml') })).toThrow(/cannot read config file/);
  });
});
