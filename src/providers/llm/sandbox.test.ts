import { describe, expect, it } from 'vitest';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { SandboxLanguageModel } from './sandbox.ts';
import { contextWindow, estimateTokens } from './tokens.ts';

const user = (text: string) => [{ role: 'user' as const, content: [{ type: 'text' as const, text }] }];

describe('sandbox language model', () => {
  it('answers deterministically and reports usage with the service token rule', async () => {
    const m = new SandboxLanguageModel('sandbox-1', { firstTokenMs: 0, chunkMs: 0 });
    const a = await m.doGenerate({ prompt: user('How late are you open?') });
    const b = await m.doGenerate({ prompt: user('How late are you open?') });
    expect(a.content).toEqual(b.content);
    const text = (a.content[0] as { text: string }).text;
    expect(text).toContain('How late are you open?');
    expect(a.usage.outputTokens.total).toBe(estimateTokens(text));
    expect(a.usage.inputTokens.total).toBeGreaterThan(estimateTokens('How late are you open?'));
  });

  it('streams word deltas after the first-token delay, paced per chunk', async () => {
    const m = new SandboxLanguageModel('sandbox-1', { firstTokenMs: 40, chunkMs: 5 });
    const started = performance.now();
    const { stream } = await m.doStream({ prompt: user('stream this please') });
    const times: number[] = [];
    const deltas: string[] = [];
    const reader = stream.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      const part = r.value;
      if (part.type === 'text-delta') {
        times.push(performance.now() - started);
        deltas.push(part.delta);
      }
    }
    expect(deltas.length).toBeGreaterThan(5);
    expect(times[0]).toBeGreaterThanOrEqual(35);
    // Due 40 ms after the call, then every 5 ms (timers may fire up to a millisecond early).
    expect(times.at(-1)!).toBeGreaterThanOrEqual(40 + (deltas.length - 1) * 5 - 2);
  });

  it('times the stream from the call, as a hosted model does: a consumer that reads late finds the first tokens there', async () => {
    const m = new SandboxLanguageModel('sandbox-1', { firstTokenMs: 40, chunkMs: 5 });
    const { stream } = await m.doStream({ prompt: user('stream this please') });
    await new Promise((r) => setTimeout(r, 60));
    const reader = stream.getReader();
    const reading = performance.now();
    let first: number | undefined;
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      if (r.value.type === 'text-delta') {
        first = performance.now() - reading;
        break;
      }
    }
    await reader.cancel();
    // Before: the 40 ms wait started at the first read.
    expect(first).toBeLessThan(20);
  });

  it('calls the named tool, then answers from its result, through the AI SDK tool loop', async () => {
    const m = new SandboxLanguageModel('sandbox-1', { firstTokenMs: 0, chunkMs: 0 });
    const seen: unknown[] = [];
    const r = streamText({
      model: m, messages: [{ role: 'user', content: '#tool:lookup{"id":7}' }], stopWhen: stepCountIs(3),
      tools: { lookup: tool({ description: 'find', inputSchema: jsonSchema({ type: 'object' }), execute: async (input) => { seen.push(input); return { name: 'Ann' }; } }) },
    });
    expect(await r.text).toContain('"name":"Ann"');
    expect(seen).toEqual([{ id: 7 }]);
  });

  it('fails on the documented trigger phrases and over the context window', async () => {
    const m = new SandboxLanguageModel('sandbox-small', { firstTokenMs: 0, chunkMs: 0 });
    await expect(m.doGenerate({ prompt: user('x #provider-error') })).rejects.toMatchObject({ statusCode: 503 });
    await expect(m.doGenerate({ prompt: user('x #context-overflow') })).rejects.toMatchObject({ data: { code: 'context_length_exceeded' } });
    await expect(m.doGenerate({ prompt: user('word '.repeat(contextWindow('sandbox-small'))) })).rejects.toMatchObject({ statusCode: 400 });
    const cut = await m.doGenerate({ prompt: user('#long-reply'), maxOutputTokens: 10 });
    expect(cut.finishReason.unified).toBe('length');
    expect(cut.usage.outputTokens.total).toBeLessThanOrEqual(10);
  });
});
