import { describe, expect, it } from 'vitest';
import { presentedKeys, protocolKey, withProtocolKey } from './credentials.js';

const anywhere = { xApiKey: false, xGoogApiKey: false };
const raw = (h: Record<string, string>): string[] => Object.entries(h).flat();

describe('the key in Sec-WebSocket-Protocol (WebSocket upgrades)', () => {
  it('is the one openai-insecure-api-key.<key> entry; none when no entry names a key', () => {
    expect(protocolKey('realtime, openai-insecure-api-key.sk-abc, openai-beta.realtime-v1')).toBe('sk-abc');
    expect(protocolKey('realtime,openai-insecure-api-key.sk-abc')).toBe('sk-abc');
    expect(protocolKey('realtime')).toBeNull();
    expect(protocolKey('realtime, openai-beta.realtime-v1')).toBeNull();
  });

  it('is no key (refused) where the relay could read another: two key entries, a bad one, anything but tokens', () => {
    expect(protocolKey('openai-insecure-api-key.sk-first, openai-insecure-api-key.sk-second')).toBe('');
    expect(protocolKey('realtime, openai-insecure-api-key.')).toBe('');
    expect(protocolKey('openai-insecure-api-keysk-abc')).toBe('');
    // A no-break space Go trims and JavaScript does not (UTF-8, as Node reads it: latin1), and one the other way round.
    expect(protocolKey(Buffer.from('realtime, \xc2\xa0openai-insecure-api-key.sk-b, openai-insecure-api-key.sk-a', 'latin1').toString('latin1'))).toBe('');
    expect(protocolKey('realtime, \u00a0openai-insecure-api-key.sk-a, openai-insecure-api-key.sk-b')).toBe('');
    expect(protocolKey('realtime; v=1')).toBe('');
    expect(protocolKey('realtime,,openai-insecure-api-key.sk-a')).toBe('');
  });

  it('counts on an upgrade only, beside Authorization (a wrong one beside a valid one still fails); an empty one is ignored, a repeated one holds no key', () => {
    const h = { authorization: 'Bearer sk-a', 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.sk-b' };
    expect(presentedKeys(h, anywhere, raw(h), true)).toEqual(['sk-b', 'sk-a']);
    expect(presentedKeys(h, anywhere, raw(h))).toEqual(['sk-a']);
    const noKey = { authorization: 'Bearer sk-a', 'sec-websocket-protocol': 'realtime' };
    expect(presentedKeys(noKey, anywhere, raw(noKey), true)).toEqual(['sk-a']);
    const empty = { authorization: 'Bearer sk-a', 'sec-websocket-protocol': '' };
    expect(presentedKeys(empty, anywhere, raw(empty), true)).toEqual(['sk-a']);
    // A key that is no token would be split in the rebuilt list: none, on an upgrade only.
    const comma = { authorization: 'Bearer sk-a-5,x', 'sec-websocket-protocol': 'realtime' };
    expect(presentedKeys(comma, anywhere, raw(comma), true)).toEqual(['']);
    expect(presentedKeys(comma, anywhere, raw(comma))).toEqual(['sk-a-5,x']);
    const twice = ['Sec-WebSocket-Protocol', 'openai-insecure-api-key.sk-b', 'Sec-WebSocket-Protocol', 'realtime'];
    expect(presentedKeys({ 'sec-websocket-protocol': 'openai-insecure-api-key.sk-b, realtime' }, anywhere, twice, true)).toEqual(['']);
  });

  it('reaches the relay rebuilt: the other entries as sent, one key entry holding the key the relay must see', () => {
    expect(withProtocolKey('realtime, openai-insecure-api-key.sk-b, openai-beta.realtime-v1', 'sk-relay')).toBe(
      'realtime, openai-insecure-api-key.sk-relay, openai-beta.realtime-v1',
    );
    expect(withProtocolKey('realtime,openai-insecure-api-key.sk-b', 'sk-relay')).toBe('realtime, openai-insecure-api-key.sk-relay');
    // No entry named a key (it came in Authorization): one is added, so that a relay reading the
    // whole value as a key (older new-api) reads this one.
    expect(withProtocolKey('realtime', 'sk-relay')).toBe('realtime, openai-insecure-api-key.sk-relay');
  });
});
