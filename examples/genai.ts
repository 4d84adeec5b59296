/**
 * The official `@google/genai` SDK against sluice: one plain and one streamed call on a free
 * model, and the free-tier errors caught by their code.
 *
 *   npm run demo                                   # prints a key
 *   SLUICE_API_KEY=sk-... npx tsx examples/genai.ts
 *   SLUICE_API_KEY=sk-... npx tsx examples/genai.ts --burst   # call until the free tier says no
 */
import { ApiError, GoogleGenAI } from '@google/genai';
import { FREE, PAID, SLUICE_URL, apiKeyOrExit, burstIfAsked, freeTierAdvice } from './free-tier.js';

const apiKey = apiKeyOrExit('examples/genai.ts');

// ApiError keeps no response headers, so Retry-After is read here, by a fetch that remembers it.
let lastRetryAfter: string | null = null;
const fetchKeepingRetryAfter: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  lastRetryAfter = res.headers.get('retry-after');
  return res;
};

// No retryOptions: this SDK does not retry unless asked to (and when asked, it ignores Retry-After).
const ai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl: SLUICE_URL, fetch: fetchKeepingRetryAfter } });

/** ApiError.message is the JSON error body; sluice's is `{ error: { code, message, type } }`. */
function errorCode(err: ApiError): string | undefined {
  try {
    return (JSON.parse(err.message) as { error?: { code?: unknown } }).error?.code as string | undefined;
  } catch {
    return undefined;
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

    await burstIfAsked(() => ai.models.generateContent({ model: FREE, contents: 'Say hello.' }));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      console.error('401: sluice did not accept the key');
      process.exit(1);
    }
    const advice = err instanceof ApiError ? freeTierAdvice(errorCode(err), lastRetryAfter) : null;
    if (advice === null) throw err;
    console.log(`\ncaught ${(err as ApiError).status} ${errorCode(err as ApiError)}: ${advice}`);
    const paid = await ai.models.generateContent({ model: PAID, contents: 'Say hello.' });
    console.log(`paid     (${PAID}): ${paid.text ?? ''}`);
  }
}

await main();
