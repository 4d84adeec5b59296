/**
 * The official `@google/genai` SDK against sluice: one plain and one streamed call on a free
 * model, and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/genai.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/genai.ts --burst   # call until the free tier says no
 */
import { ApiError, GoogleGenAI } from '@google/genai';

const baseUrl = (process.env.SLUICE_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const apiKey = process.env.SLUICE_API_KEY;
if (!apiKey) {
  console.error('SLUICE_API_KEY is not set: run `npm run demo` and copy the key it prints, then\n  SLUICE_API_KEY=sk-... npx tsx examples/genai.ts');
  process.exit(1);
}

const FREE = 'vend-flash-free';
const PAID = FREE.replace(/-free$/, ''); // the paid counterpart: use it for stable service

// ApiError keeps no response headers, so Retry-After is read here, by a fetch that remembers it.
let lastRetryAfter: string | null = null;
const fetchKeepingRetryAfter: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  lastRetryAfter = res.headers.get('retry-after');
  return res;
};

// No retryOptions: this SDK does not retry unless asked to (and when asked, it ignores Retry-After).
const ai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl, fetch: fetchKeepingRetryAfter } });

/** ApiError.message is the JSON error body; sluice's is `{ error: { code, message, type } }`. */
function errorCode(err: ApiError): string | undefined {
  try {
    return (JSON.parse(err.message) as { error?: { code?: unknown } }).error?.code as string | undefined;
  } catch {
    return undefined;
  }
}

/** What to do about a free-tier error, by its code; null for any other error. */
function freeTierAdvice(err: unknown): string | null {
  if (!(err instanceof ApiError)) return null;
  switch (errorCode(err)) {
    case 'free_tier_rate_limited': // 429
      return `per-minute free-tier limit: retry after ${lastRetryAfter ?? '?'} s`;
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
    const res = await ai.models.generateContent({ model: FREE, contents: 'Say hello.' });
    console.log(`plain    (${FREE}): ${res.text ?? ''}`);

    process.stdout.write(`streamed (${FREE}): `);
    for await (const chunk of await ai.models.generateContentStream({ model: FREE, contents: 'Say hello.' })) {
      process.stdout.write(chunk.text ?? '');
    }
    process.stdout.write('\n');

    if (process.argv.includes('--burst')) {
      for (let i = 1; i <= 120; i++) {
        await ai.models.generateContent({ model: FREE, contents: 'Say hello.' });
        process.stdout.write(`\rburst: ${i} more free calls admitted`);
      }
      process.stdout.write('\n');
    }
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      console.error('401: sluice did not accept the key');
      process.exit(1);
    }
    const advice = freeTierAdvice(err);
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as ApiError).status} ${errorCode(err as ApiError)}: ${advice}`);
    const paid = await ai.models.generateContent({ model: PAID, contents: 'Say hello.' });
    console.log(`paid     (${PAID}): ${paid.text ?? ''}`);
  }
}

await main();
