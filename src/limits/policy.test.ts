import { describe, expect, it } from 'vitest';
import { ManualClock } from '../runtime/clock.js';
import { buildConfig } from '../config/index.js';
import { applyReload, buildPolicy } from './policy.js';
import { MemoryStore } from '../store/memory.js';

const ENV = { SLUICE_UPSTREAM_URL: 'http://127.0.0.1:3000' };
const RULE = { name: 'q', paths: ['/api/log/token'], limit: 1, windowSeconds: 600, shadow: false };

describe('buildPolicy', () => {
  for (const seconds of [0, 5]) {
    it(`remembers refusals for limits.rememberRefusalsSeconds (${seconds} s) in both limiters`, async () => {
      const config = buildConfig({ freeTier: { perMinute: 1 }, ipLimits: [RULE], limits: { rememberRefusalsSeconds: seconds } }, ENV);
      const clock = new ManualClock();
      const p = buildPolicy(config, new MemoryStore(), clock);
      const rule = p.ipLimiter.match('/api/log/token')!;
      for (const admit of [() => p.freeTier.admit('u'), () => p.ipLimiter.admit(rule, '192.0.2.1')]) {
        expect((await admit()).admitted).toBe(true);
        expect((await admit()).admitted).toBe(false);
        clock.advance(seconds * 1000 - 1);
        const answeredFromMemory = !(admit() instanceof Promise);
        expect(answeredFromMemory).toBe(seconds > 0);
        clock.advance(1);
        expect(admit()).toBeInstanceOf(Promise);
        clock.advance(-seconds * 1000);
      }
    });
  }
});

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
