/**
 * The official `@anthropic-ai/sdk` against sluice: one plain and one streamed call on a free
 * model, and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/anthropic.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/anthropic.ts --burst   # call until the free tier says no
 */
import Anthropic, { APIError, AuthenticationError } from '@anthropic-ai/sdk';
import { FREE, PAID, SLUICE_URL, apiKeyOrExit, burstIfAsked, freeTierAdvice } from './free-tier.js';

const apiKey = apiKeyOrExit('examples/anthropic.ts');
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
  baseURL: SLUICE_URL,
  maxRetries: 0,
  defaultHeaders: { 'x-api-key': apiKey, authorization: null, 'anthropic-version': '2023-06-01' },
});

/** sluice's error bodies are `{ error: { code, message, type } }`; the SDK keeps the body in `err.error`. */
function errorCode(err: APIError): string | undefined {
  return (err.error as { error?: { code?: string } } | undefined)?.error?.code;
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

    await burstIfAsked(() => client.messages.create(params(FREE)));
  } catch (err) {
    if (err instanceof AuthenticationError) {
      console.error(`401: sluice did not accept the key (${err.apiMessage ?? err.message})`);
      process.exit(1);
    }
    // The 429 is a RateLimitError, the 402s PaymentRequiredError; Retry-After is in err.headers.
    const advice = err instanceof APIError ? freeTierAdvice(errorCode(err), err.headers?.get('retry-after')) : null;
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as APIError).status} ${errorCode(err as APIError)}: ${advice}`);
    console.log(`paid     (${PAID}): ${text(await client.messages.create(params(PAID)))}`);
  }
}

await main();
