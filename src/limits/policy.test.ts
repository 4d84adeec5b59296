import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../test/support/clock.js';
import { buildConfig } from '../config/index.js';
import { buildPolicy } from './policy.js';
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
        expect('remembered' in (await admit())).toBe(seconds > 0);
        clock.advance(1);
        expect(await admit()).not.toHaveProperty('remembered');
        clock.advance(-seconds * 1000);
      }
    });
  }
});
