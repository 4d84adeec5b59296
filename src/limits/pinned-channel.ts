/**
 * Calls pinned to a relay channel. new-api reads `sk-<key>-<n>` as key `<key>` asking for channel
 * `n` (middleware/auth.go: the second part of the key split on `-`), grants it to an
 * administrator's token, and then serves whatever model the call names from that channel
 * (middleware/distributor.go: no model check, no retry elsewhere). A paid model's name can so reach
 * the free models' upstream, and sluice, which reads only the name, cannot see which channel
 * serves what: `freeTier.pinnedChannels` says which pinned calls count as free.
 */
import { keyBody } from '../auth/keys.js';

/** The channel the relay reads from a key as the relay receives it (`strconv.Atoi` of its second part is the relay's), or null when it asks for none. */
export function pinnedChannel(forwardedKey: string): string | null {
  const body = keyBody(forwardedKey);
  const dash = body.indexOf('-');
  if (dash === -1) return null;
  const next = body.indexOf('-', dash + 1);
  return body.slice(dash + 1, next === -1 ? undefined : next);
}

/** Go's `strconv.Atoi` text of a channel id, as its decimal digits without leading zeros; null when Atoi fails or the id cannot be a channel's (not above 0). */
function channelId(text: string): string | null {
  const m = /^\+?0*(\d+)$/.exec(text);
  // At most 19 digits: past int64 Atoi fails (the relay answers 400), and no listed id is that long.
  return m === null || m[1]!.length > 19 || m[1] === '0' ? null : m[1]!;
}

/**
 * Whether a call forwarded with `forwardedKey` counts as free for the channel it is pinned to:
 * `all` counts every pinned call (a pin that is no channel id the relay answers 400 or 403,
 * counted as any failed call is), a list only those pinned to one of its ids.
 */
export function pinnedChannelRule(pinned: 'all' | readonly number[]): (forwardedKey: string) => boolean {
  if (pinned === 'all') return (key) => pinnedChannel(key) !== null;
  const listed = new Set(pinned.map(String));
  if (listed.size === 0) return () => false;
  return (key) => {
    const text = pinnedChannel(key);
    const id = text === null ? null : channelId(text);
    return id !== null && listed.has(id);
  };
}
