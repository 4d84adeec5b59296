import { describe, expect, it } from 'vitest';
import { buildConfig } from './index.js';
import { applyReload } from './reload.js';

const ENV = { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000' };

describe('applyReload', () => {
  const running = buildConfig({ freeTier: { perMinute: 20 } }, { ...ENV, SLUICE_ADMIN_TOKEN: 'a'.repeat(32), SLUICE_PORT: '8080' });

  it('takes every other setting from the new file and names nothing when no start-up-only one changed', () => {
    const next = buildConfig({ freeTier: { perMinute: 5 }, accessLog: 'errors', logLevel: 'warn' }, { ...ENV, SLUICE_ADMIN_TOKEN: 'a'.repeat(32), SLUICE_PORT: '8080' });
    const { config, ignored } = applyReload(running, next);
    expect(ignored).toEqual([]);
    expect(config.freeTier.perMinute).toBe(5);
    expect(config.accessLog).toBe('errors');
    expect(config.logLevel).toBe('warn');
  });

  it('keeps the running relay URL, Redis, listeners and admin token, and names each but the token', () => {
    const next = buildConfig(
      { freeTier: { perMinute: 5 }, redis: { keyPrefix: 'other:' } },
      { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:9/', SLUICE_ADMIN_TOKEN: 'b'.repeat(32), SLUICE_PORT: '9090', SLUICE_ADMIN_PORT: '9091' },
    );
    expect(next.adminToken).not.toBe(running.adminToken);
    const { config, ignored } = applyReload(running, next);
    expect(ignored).toEqual(['upstream.url', 'redis', 'port', 'adminPort']);
    expect(config.upstream.url.href).toBe(running.upstream.url.href);
    expect(config.redis).toEqual(running.redis);
    expect([config.host, config.port, config.adminHost, config.adminPort]).toEqual([running.host, running.port, running.adminHost, running.adminPort]);
    expect(config.adminToken).toBe(running.adminToken);
    expect(config.freeTier.perMinute).toBe(5);
  });
});
