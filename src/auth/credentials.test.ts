import { describe, expect, it } from 'vitest';
import { presentedKeys, protocolKey, withProtocolKey } from './credentials.js';

const anywhere = { xApiKey: false, xGoogApiKey: false };
const raw = (h: Record<string, string>): string[] => Object.entries(h).flat();

describe('the key in Sec-WebSocket-Protocol (WebSocket upgrades)', () => {
  it('is read as new-api reads it: the first openai-insecure-api-key entry, else the whole value', () => {
    expect(protocolKey('realtime, openai-insecure-api-key.sk-abc, openai-beta.realtime-v1')).toBe('sk-abc');
    expect(protocolKey('realtime,openai-insecure-api-key.sk-abc')).toBe('sk-abc');
    expect(protocolKey('openai-insecure-api-key.sk-first, openai-insecure-api-key.sk-second')).toBe('sk-first');
    expect(protocolKey('realtime')).toBe('realtime');
    expect(protocolKey(' sk-whole ')).toBe('sk-whole');
  });

  it('counts on an upgrade only, beside Authorization (a wrong one beside a valid one still fails); an empty one is ignored, a repeated one holds no key', () => {
    const h = { authorization: 'Bearer sk-a', 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-b' };
    expect(presentedKeys(h, anywhere, raw(h), true)).toEqual(['sk-b', 'sk-a']);
    expect(presentedKeys(h, anywhere, raw(h))).toEqual(['sk-a']);
    const empty = { authorization: 'Bearer sk-a', 'sec-websocket-protocol': '' };
    expect(presentedKeys(empty, anywhere, raw(empty), true)).toEqual(['sk-a']);
    const twice = ['Sec-WebSocket-Protocol', 'openai-insecure-api-key.sk-b', 'Sec-WebSocket-Protocol', 'realtime'];
    expect(presentedKeys({ 'sec-websocket-protocol': 'openai-insecure-api-key.sk-b, realtime' }, anywhere, twice, true)).toEqual(['']);
  });

  it('is replaced in its own entry, the others as sent', () => {
    expect(withProtocolKey('realtime, openai-insecure-api-key.sk-b, openai-beta.realtime-v1', 'sk-relay')).toBe(
      'realtime, openai-insecure-api-key.sk-relay, openai-beta.realtime-v1',
    );
    expect(withProtocolKey('realtime,openai-insecure-api-key.sk-b', 'sk-relay')).toBe('realtime,openai-insecure-api-key.sk-relay');
    expect(withProtocolKey('sk-b', 'sk-relay')).toBe('sk-relay');
  });
});
