/**
 * The official `@anthropic-ai/sdk` against sluice: one plain and one streamed call on a free
 * model, and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/anthropic.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/anthropic.ts --burst   # call until the free tier says no
 */
import Anthropic, { APIError, AuthenticationError } from '@anthropic-ai/sdk';

const baseURL = (process.env.SLUICE_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const apiKey = process.env.SLUICE_API_KEY;
if (!apiKey) {
  console.error('SLUICE_API_KEY is not set: run `npm run demo` and copy the key it prints, then\n  SLUICE_API_KEY=sk-... npx tsx examples/anthropic.ts');
  process.exit(1);
}

const FREE = 'vend-flash-free';
const PAID = FREE.replace(/-free$/, ''); // the paid counterpart: use it for stable service
const params = (model: string): Anthropic.MessageCreateParamsNonStreaming => ({
  model,
  max_tokens: 256,
  messages: [{ role: 'user', content: 'Say hello.' }],
});

// The SDK's default (Authorization: Bearer, its own anthropic-version) works with sluice too;
// these headers send the key the way the contract describes messages-protocol clients.
// maxRetries: 0 so the free-tier 429 reaches this code at once (the default, 2, makes the SDK
// sleep for Retry-After itself and try again).
const client = new Anthropic({
  apiKey,
  baseURL,
  maxRetries: 0,
  defaultHeaders: { 'x-api-key': apiKey, authorization: null, 'anthropic-version': '2023-06-01' },
});

/** sluice's error bodies are `{ error: { code, message, type } }`; the SDK keeps the body in `err.error`. */
function errorCode(err: APIError): string | undefined {
  return (err.error as { error?: { code?: string } } | undefined)?.error?.code;
}

/** What to do about a free-tier error, by its code; null for any other error. */
function freeTierAdvice(err: unknown): string | null {
  if (!(err instanceof APIError)) return null;
  switch (errorCode(err)) {
    case 'free_tier_rate_limited': // 429, RateLimitError
      return `per-minute free-tier limit: retry after ${err.headers?.get('retry-after') ?? '?'} s`;
    case 'free_tier_daily_exhausted': // 402, PaymentRequiredError
      return 'daily free-tier limit reached: it resets at 00:00 Beijing time';
    case 'free_tier_exhausted': // 402, PaymentRequiredError
      return 'the upstream free tier is busy: back off 30 to 60 s';
    default:
      return null;
  }
}

const text = (msg: Anthropic.Message): string => msg.content.map((b) => (b.type === 'text' ? b.text : '')).join('');

async function main(): Promise<void> {
  try {
    console.log(`plain    (${FREE}): ${text(await client.messages.create(params(FREE)))}`);

    process.stdout.write(`streamed (${FREE}): `);
    const stream = client.messages.stream(params(FREE));
    stream.on('text', (t) => process.stdout.write(t));
    await stream.finalMessage(); // rejects with the same error classes as messages.create
    process.stdout.write('\n');

    if (process.argv.includes('--burst')) {
      for (let i = 1; i <= 120; i++) {
        await client.messages.create(params(FREE));
        process.stdout.write(`\rburst: ${i} more free calls admitted`);
      }
      process.stdout.write('\n');
    }
  } catch (err) {
    if (err instanceof AuthenticationError) {
      console.error(`401: sluice did not accept the key (${err.apiMessage ?? err.message})`);
      process.exit(1);
    }
    const advice = freeTierAdvice(err);
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as APIError).status} ${errorCode(err as APIError)}: ${advice}`);
    console.log(`paid     (${PAID}): ${text(await client.messages.create(params(PAID)))}`);
  }
}

await main();
