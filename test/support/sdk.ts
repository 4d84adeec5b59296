/**
 * What an official SDK yields from the relay stand-in's answers, checked the same way by the
 * stand-in's own tests (demo/relay.test.ts, the SDKs on the stand-in directly) and by the
 * conformance suite (the SDKs through sluice).
 */
import { expect } from 'vitest';
import type OpenAI from 'openai';
import type { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream';
import { STANDIN_MODELS, STANDIN_TEXT } from '../../demo/relay.js';

/** openai's models.list, paged through: every item a `model`, their ids the stand-in's models. */
export async function expectStandinModelList(openai: OpenAI): Promise<void> {
  const ids: string[] = [];
  for await (const m of openai.models.list()) {
    expect(m.object).toBe('model');
    ids.push(m.id);
  }
  expect(ids).toEqual([...STANDIN_MODELS]);
}

/**
 * An anthropic messages.stream read to the end: its `text` events and its final text are the
 * stand-in's text, and the final message stopped at end_turn with output tokens counted.
 */
export async function expectStandinMessageStream(stream: MessageStream): Promise<void> {
  let texts = '';
  stream.on('text', (t) => {
    texts += t;
  });
  const finalText = await stream.finalText();
  const final = await stream.finalMessage();
  expect(finalText).toBe(STANDIN_TEXT);
  expect(texts).toBe(STANDIN_TEXT);
  expect(final.stop_reason).toBe('end_turn');
  expect(final.usage.output_tokens).toBeGreaterThan(0);
}
