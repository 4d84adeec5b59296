/**
 * What the three SDK examples share: where sluice listens and the key to call it with, the free
 * model and its paid counterpart, what to do about each free-tier error code, and the --burst
 * loop. How the code and Retry-After are read from an error is each SDK's own: see the examples.
 */

/** Where sluice listens, without a trailing slash. */
export const SLUICE_URL = (process.env.SLUICE_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');

/** SLUICE_API_KEY; without it, says where to get one and exits. */
export function apiKeyOrExit(script: string): string {
  const apiKey = process.env.SLUICE_API_KEY;
  if (!apiKey) {
    console.error(`SLUICE_API_KEY is not set: run \`npm run demo\` and copy the key it prints, then\n  SLUICE_API_KEY=sk-... npx tsx ${script}`);
    process.exit(1);
  }
  return apiKey;
}

export const FREE = 'vend-flash-free';
export const PAID = FREE.replace(/-free$/, ''); // the paid counterpart: use it for stable service

/** What to do about a free-tier error, by its code; null for any other code. */
export function freeTierAdvice(code: string | undefined, retryAfter: string | null | undefined): string | null {
  switch (code) {
    case 'free_tier_rate_limited': // 429
      return `per-minute free-tier limit: retry after ${retryAfter ?? '?'} s`;
    case 'free_tier_daily_exhausted': // 402
      return 'daily free-tier limit reached: it resets at 00:00 Beijing time';
    case 'free_tier_exhausted': // 402
      return 'the upstream free tier is busy: back off 30 to 60 s';
    default:
      return null;
  }
}

/** With --burst: `call` on the free model again and again, until the free tier answers with an error. */
export async function burstIfAsked(call: () => Promise<unknown>): Promise<void> {
  if (!process.argv.includes('--burst')) return;
  for (let i = 1; i <= 120; i++) {
    await call();
    process.stdout.write(`\rburst: ${i} more free calls admitted`);
  }
  process.stdout.write('\n');
}
