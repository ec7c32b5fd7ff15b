import assert from 'node:assert/strict';
import { geminiSampleText, startFakeGeminiUpstream, type FakeGeminiUpstream } from '../fakes/gemini-upstream';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M } from '../openai/fixture';
import { startGeminiFixture, type GeminiFixture } from './fixture';

/*
 * The Gemini streamGenerateContent stream to a `gemini` upstream on the fast path
 * (core/chat/fast-path.ts) and on the native path (frames carried as chunks' native events) side
 * by side: the same frames, usage and money on both; on the fast path Google's frames reach the
 * client as Google wrote them (its spacing: `"text": "…"`), svc's model id in `modelVersion`.
 * The fake replays recorded streams (test/fixtures/gemini, provenance in its SOURCES.md).
 */

type Json = Record<string, unknown>;

/** A recorded stream as the client should see it: svc's model id in each `modelVersion`. */
const withSvcModel = (text: string): string => text.replace(/"modelVersion": "[^"]*"/g, '"modelVersion": "svc-gem"');

const framesOf = (text: string): Json[] =>
  text
    .split(/\r?\n\r?\n/)
    .filter((f) => f.startsWith('data: '))
    .map((f) => JSON.parse(f.slice(6)) as Json);

const costOf = (frames: readonly Json[]): bigint => {
  const usage = frames.at(-1)?.['usageMetadata'] as Record<string, number>;
  return expectedCost(
    usage['promptTokenCount'] ?? 0,
    (usage['candidatesTokenCount'] ?? 0) + (usage['thoughtsTokenCount'] ?? 0),
  );
};

for (const fast of [true, false]) {
  describe(`Gemini API: streams to a gemini upstream on the ${fast ? 'fast' : 'native'} path`, function () {
    let google: FakeGeminiUpstream;
    let fx: GeminiFixture;
    const previous = process.env['SVC_FAST_PATH'];

    before(async () => {
      // The config decides here, whatever the run's SVC_FAST_PATH says.
      delete process.env['SVC_FAST_PATH'];
      google = await startFakeGeminiUpstream();
      fx = await startGeminiFixture({
        extraConfig: `chat:\n  fast_path: ${fast}\n`,
        extraModels: () => `
  svc-gem:
    provider: gemini
    base_url: ${google.baseUrl}
    api_key: test-gemini-secret
    upstream_model: gemini-2.5-flash
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 100000
    max_output_tokens: 1000
`,
      });
    });
    after(async () => {
      if (previous === undefined) delete process.env['SVC_FAST_PATH'];
      else process.env['SVC_FAST_PATH'] = previous;
      await fx?.close();
      await google?.close();
    });

    const stream = async (key: string, query: string): Promise<{ status: number; text: string }> => {
      const res = await fetch(`${fx.geminiURL}/v1beta/models/svc-gem:streamGenerateContent${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Why is the sky blue?' }] }] }),
      });
      return { status: res.status, text: await res.text() };
    };

    for (const sample of ['stream-generate-content.sse.txt', 'stream-generate-content-thinking.sse.txt'])
      it(`${sample} (?alt=sse): Google's frames as it wrote them, svc's model id, its usage charged once`, async () => {
        const { key, accountId } = await fx.fund(1_000_000);
        google.next({ kind: 'sse', sample });
        const { status, text } = await stream(key, '?alt=sse');
        assert.equal(status, 200);
        const expected = withSvcModel(geminiSampleText(sample));
        // Google writes `"key": value`; the native path writes its frames again without the spaces.
        assert.equal(text === expected, fast, 'byte for byte on the fast path only');
        assert.deepEqual(framesOf(text), framesOf(expected));
        assert.equal((await fx.settled(accountId)).balance, 1_000_000n - costOf(framesOf(expected)));
        assert.equal(google.requests.at(-1)?.query, '?alt=sse');
      });

    it('the JSON-array framing carries the same frames', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      google.next({ kind: 'sse', sample: 'stream-generate-content.sse.txt' });
      const { text } = await stream(key, '');
      const expected = framesOf(withSvcModel(geminiSampleText('stream-generate-content.sse.txt')));
      assert.deepEqual(JSON.parse(text), expected);
      // Google's own text inside the array on the fast path.
      assert.equal(text.includes('"modelVersion": "svc-gem"'), fast);
      assert.equal((await fx.settled(accountId)).balance, 1_000_000n - costOf(expected));
    });

    it('an upstream without usage: a last frame of svc’s count, estimated, exactly that charged', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      const recorded = framesOf(geminiSampleText('stream-generate-content.sse.txt')).map((frame) => {
        const { usageMetadata: _usage, ...rest } = frame;
        return rest;
      });
      google.next({ kind: 'sse-text', text: recorded.map((f) => `data: ${JSON.stringify(f)}\r\n\r\n`).join('') });
      const frames = framesOf((await stream(key, '?alt=sse')).text);
      assert.equal(frames.length, recorded.length + 1);
      const usage = frames.at(-1)?.['usageMetadata'] as Record<string, number | boolean>;
      assert.equal(usage['estimated'], true);
      assert.equal(frames.at(-1)?.['modelVersion'], 'svc-gem');
      const prompt = usage['promptTokenCount'] as number;
      const output = usage['candidatesTokenCount'] as number;
      assert.ok(prompt > 0 && output > 0);
      assert.equal((await fx.settled(accountId)).balance, 1_000_000n - expectedCost(prompt, output));
    });

    it('an error frame mid-stream, or a stream cut before it finished: an error frame, nothing charged', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      const first = geminiSampleText('stream-generate-content.sse.txt').split('\r\n\r\n')[0] ?? '';
      google.next({
        kind: 'sse-text',
        text: `${first}\r\n\r\ndata: {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}\r\n\r\n`,
      });
      const failed = framesOf((await stream(key, '?alt=sse')).text);
      assert.ok(Array.isArray(failed[0]?.['candidates']));
      assert.ok(failed.at(-1)?.['error'] !== undefined);
      google.next({ kind: 'sse-text', text: `${first}\r\n\r\n` });
      const cut = framesOf((await stream(key, '?alt=sse')).text);
      assert.ok(cut.at(-1)?.['error'] !== undefined);
      assert.deepEqual(await fx.settled(accountId), { balance: 1_000_000n, held: 0n });
    });
  });
}
