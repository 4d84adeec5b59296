import { describe, expect, it } from 'vitest';
import { connectionCap, descriptorBound, openFileLimit, RESERVED_DESCRIPTORS } from './connections.js';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

describe('the connection cap', () => {
  it('reads the soft descriptor limit from /proc/self/limits, and null when there is none to read', () => {
    expect(openFileLimit(() => LIMITS)).toBe(1024);
    expect(openFileLimit(() => LIMITS.replace('1024   ', 'unlimited'))).toBeNull();
    expect(
      openFileLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeNull();
    // This process's own, on Linux.
    expect(openFileLimit()).toBeGreaterThan(0);
  });

  it('leaves a relay socket per client connection and the reserved descriptors below the limit', () => {
    expect(descriptorBound(1024)).toBe((1024 - RESERVED_DESCRIPTORS) / 2);
    for (const nofile of [600, 1024, 65_536, 1_048_576]) expect(2 * descriptorBound(nofile) + RESERVED_DESCRIPTORS).toBeLessThanOrEqual(nofile);
    expect(descriptorBound(100)).toBe(1);
  });

  it('is by default the smaller of the memory-sized default and what the descriptors allow', () => {
    expect(connectionCap(null, 1_048_576, 4096)).toEqual({ cap: 4096, nofile: 1_048_576 });
    expect(connectionCap(null, 1024, 4096)).toEqual({ cap: 256, nofile: 1024 });
    expect(connectionCap(null, null, 4096)).toEqual({ cap: 4096, nofile: null });
  });

  it('keeps a configured cap, with a warning naming the setting when it leaves no room below the limit', () => {
    expect(connectionCap(100, 1024, 4096)).toEqual({ cap: 100, nofile: 1024 });
    const over = connectionCap(2000, 1024, 4096);
    expect(over.cap).toBe(2000);
    expect(over.warning).toMatch(/server\.maxConnections \(2000\).*descriptor limit \(1024\).*at most 256/);
  });
});
