/**
 * The official `openai` SDK against sluice: one plain and one streamed call on a free model,
 * and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/openai.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/openai.ts --burst   # call until the free tier says no
 */
import OpenAI, { APIError, AuthenticationError } from 'openai';
import { FREE, PAID, SLUICE_URL, apiKeyOrExit, burstIfAsked, freeTierAdvice } from './free-tier.js';

const apiKey = apiKeyOrExit('examples/openai.ts');
const messages = [{ role: 'user' as const, content: 'Say hello.' }];

// maxRetries: 0 so the free-tier 429 reaches this code at once. With the default (2) the SDK
// itself sleeps for Retry-After (up to 60 s on the free tier) and tries again.
const client = new OpenAI({ apiKey, baseURL: `${SLUICE_URL}/v1`, maxRetries: 0 });

async function main(): Promise<void> {
  try {
    const completion = await client.chat.completions.create({ model: FREE, messages });
    console.log(`plain    (${FREE}): ${completion.choices[0]?.message.content ?? ''}`);

    process.stdout.write(`streamed (${FREE}): `);
    const stream = await client.chat.completions.create({ model: FREE, messages, stream: true });
    for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta.content ?? '');
    process.stdout.write('\n');

    await burstIfAsked(() => client.chat.completions.create({ model: FREE, messages }));
  } catch (err) {
    if (err instanceof AuthenticationError) {
      console.error(`401: sluice did not accept the key (${err.message})`);
      process.exit(1);
    }
    // The free-tier code is err.code; Retry-After is in err.headers.
    const advice = err instanceof APIError ? freeTierAdvice(err.code ?? undefined, err.headers?.get('retry-after')) : null;
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as APIError).status} ${(err as APIError).code}: ${advice}`);
    const paid = await client.chat.completions.create({ model: PAID, messages });
    console.log(`paid     (${PAID}): ${paid.choices[0]?.message.content ?? ''}`);
  }
}

await main();
