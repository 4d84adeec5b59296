import { describe, expect, it } from 'vitest';
import { pinnedChannel, pinnedChannelRule } from './pinned-channel.js';

describe('pinnedChannel: the channel the relay reads from a key (new-api TokenAuth)', () => {
  it('is the second part of the key split on "-", after one leading sk-', () => {
    expect(pinnedChannel('sk-abc')).toBeNull();
    expect(pinnedChannel('abc')).toBeNull();
    expect(pinnedChannel('sk-abc-7')).toBe('7');
    expect(pinnedChannel('abc-7')).toBe('7');
    expect(pinnedChannel('sk-abc-7-9')).toBe('7');
    // Go's Split gives an empty second part: the relay asks for a channel and fails to read it.
    expect(pinnedChannel('sk-abc-')).toBe('');
    // Only one sk- is trimmed: the rest is the key's.
    expect(pinnedChannel('sk-sk-abc')).toBe('abc');
  });
});

describe('pinnedChannelRule: which pinned calls count as free', () => {
  it('all: every key that asks for a channel, none that does not', () => {
    const free = pinnedChannelRule('all');
    expect(['sk-abc-7', 'sk-abc-', 'abc-x'].map(free)).toEqual([true, true, true]);
    expect(['sk-abc', 'abc'].map(free)).toEqual([false, false]);
  });

  it('a list: the channels the relay reads as a listed id (strconv.Atoi: a + sign and leading zeros allowed)', () => {
    const free = pinnedChannelRule([7, 12]);
    expect(['sk-abc-7', 'sk-abc-+7', 'sk-abc-007', 'sk-abc-12-x'].map(free)).toEqual([true, true, true, true]);
    expect(['sk-abc', 'sk-abc-8', 'sk-abc-70', 'sk-abc-1', 'sk-abc-', 'sk-abc-7x', 'sk-abc-++7', 'sk-abc- 7', 'sk-abc-0'].map(free)).toEqual(new Array(9).fill(false));
  });

  it('an empty list counts none', () => {
    expect(pinnedChannelRule([])('sk-abc-7')).toBe(false);
  });
});
