/**
 * The official `openai` SDK against sluice: one plain and one streamed call on a free model,
 * and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/openai.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/openai.ts --burst   # call until the free tier says no
 */
import OpenAI, { APIError, AuthenticationError } from 'openai';

const baseURL = `${(process.env.SLUICE_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '')}/v1`;
const apiKey = process.env.SLUICE_API_KEY;
if (!apiKey) {
  console.error('SLUICE_API_KEY is not set: run `npm run demo` and copy the key it prints, then\n  SLUICE_API_KEY=sk-... npx tsx examples/openai.ts');
  process.exit(1);
}

const FREE = 'vend-flash-free';
const PAID = FREE.replace(/-free$/, ''); // the paid counterpart: use it for stable service
const messages = [{ role: 'user' as const, content: 'Say hello.' }];

// maxRetries: 0 so the free-tier 429 reaches this code at once. With the default (2) the SDK
// itself sleeps for Retry-After (up to 60 s on the free tier) and tries again.
const client = new OpenAI({ apiKey, baseURL, maxRetries: 0 });

/** What to do about a free-tier error, by its code; null for any other error. */
function freeTierAdvice(err: unknown): string | null {
  if (!(err instanceof APIError)) return null;
  switch (err.code) {
    case 'free_tier_rate_limited': // 429
      return `per-minute free-tier limit: retry after ${err.headers?.get('retry-after') ?? '?'} s`;
    case 'free_tier_daily_exhausted': // 402
      return 'daily free-tier limit reached: it resets at 00:00 Beijing time';
    case 'free_tier_exhausted': // 402
      return 'the upstream free tier is busy: back off 30 to 60 s';
    default:
      return null;
  }
}

async function main(): Promise<void> {
  try {
    const completion = await client.chat.completions.create({ model: FREE, messages });
    console.log(`plain    (${FREE}): ${completion.choices[0]?.message.content ?? ''}`);

    process.stdout.write(`streamed (${FREE}): `);
    const stream = await client.chat.completions.create({ model: FREE, messages, stream: true });
    for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta.content ?? '');
    process.stdout.write('\n');

    if (process.argv.includes('--burst')) {
      for (let i = 1; i <= 120; i++) {
        await client.chat.completions.create({ model: FREE, messages });
        process.stdout.write(`\rburst: ${i} more free calls admitted`);
      }
      process.stdout.write('\n');
    }
  } catch (err) {
    if (err instanceof AuthenticationError) {
      console.error(`401: sluice did not accept the key (${err.message})`);
      process.exit(1);
    }
    const advice = freeTierAdvice(err);
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as APIError).status} ${(err as APIError).code}: ${advice}`);
    const paid = await client.chat.completions.create({ model: PAID, messages });
    console.log(`paid     (${PAID}): ${paid.choices[0]?.message.content ?? ''}`);
  }
}

await main();
