import assert from 'node:assert/strict';
import { countTokens as cl100k } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import { countTokens as o200k } from 'gpt-tokenizer/cjs/encoding/o200k_base';
import OpenAI from 'openai';
import { countTokensLinear, promptTokenUpperBound } from '../../core/providers/llm/tokens';
import type { WireMessage } from '../../core/providers/llm/types';
import { expectedCost, startRoutingFixture, type RoutingFixture } from './fixture';

// Texts of the kinds svc's users send: prose in the scripts they write, code, data, noise.
const SAMPLES: Record<string, string> = {
  english: 'The quick brown fox jumps over the lazy dog, then asks for a summary of the meeting notes. ',
  persian: 'سلام، لطفا خلاصه‌ای از متن زیر بنویسید و قیمت گوشی موبایل را به تومان بگویید. ',
  chinese: '你好，请帮我总结以下会议记录，并列出需要跟进的事项。',
  hindi: 'नमस्ते, कृपया निम्नलिखित पाठ का सारांश लिखें। ',
  code: 'export function add(a: number, b: number): number {\n  return a + b; // 0x1f2e3d\n}\n',
  json: '{"id":"chatcmpl-123","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}',
  base64: 'aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgZW5jb2RlZCB0ZXh0IGZvciB0aGUgdGVzdA==',
  emoji: '🙂🚀🔥 ok 👍🏽👩‍💻 ',
  digits: '3.14159265358979323846264338327950288419716939937510 ',
};

// Anthropic's tokenizer counts up to ~1.35× OpenAI's on English (its own migration notes);
// the bound must hold that much above the larger of the two OpenAI vocabularies.
const CROSS_FAMILY = 1.35;

describe('the hold bound (issue 15 point 4)', function () {
  it('is at least the real token count of every sample, with room for other families, and at most one per byte', () => {
    for (const [name, unit] of Object.entries(SAMPLES)) {
      for (const repeat of [1, 10, 200]) {
        const text = unit.repeat(repeat);
        const messages: WireMessage[] = [
          { role: 'system', content: 'You are helpful.' },
          { role: 'user', content: text },
        ];
        const bound = promptTokenUpperBound(messages);
        const real = Math.max(cl100k(text), o200k(text)) + cl100k('You are helpful.');
        assert.ok(
          bound >= Math.ceil(real * CROSS_FAMILY),
          `${name}×${repeat}: bound ${bound} < ${real} × ${CROSS_FAMILY}`,
        );
        const bytes = Buffer.byteLength(JSON.stringify({ messages, tools: [] }), 'utf8') + 2 * 4;
        assert.ok(bound <= bytes, `${name}×${repeat}: bound ${bound} above the bytes bound ${bytes}`);
      }
    }
  });

  it('counts long unbroken runs in slices (linear time) without falling below the whole-run count', () => {
    // A prompt of one 250 KB "word" took cl100k's BPE over a minute of the core's CPU before runs
    // were sliced; sliced, with a token per slice for merges a cut can gain, it counts no fewer.
    const runs = [
      'a'.repeat(3000),
      'ab'.repeat(1500),
      'x9'.repeat(1200),
      ',.;'.repeat(900),
      ' '.repeat(2000) + 'word',
      'سلام'.repeat(700),
      'https://example.com/' + 'p/'.repeat(1200),
    ];
    for (const run of runs) assert.ok(countTokensLinear(run, Infinity, 1) >= cl100k(run), run.slice(0, 20));
    assert.equal(
      countTokensLinear('An ordinary sentence, counted exactly.'),
      cl100k('An ordinary sentence, counted exactly.'),
    );
  });

  it('is no longer loose by 3-4× on prose', () => {
    const text = SAMPLES['english']?.repeat(200) ?? '';
    const bound = promptTokenUpperBound([{ role: 'user', content: text }]);
    const bytes = Buffer.byteLength(text, 'utf8');
    assert.ok(bound * 2.5 < bytes, `bound ${bound} for ${bytes} bytes`);
    assert.ok(bound < 2 * o200k(text), `bound ${bound}, real ${o200k(text)}`);
  });

  describe('a small wallet', function () {
    this.timeout(60_000);
    let fx: RoutingFixture;
    before(async () => {
      fx = await startRoutingFixture();
    });
    after(async () => {
      await fx.close();
    });

    it('is no longer refused for a long prompt it can pay', async () => {
      // ~19 KB of English: one token per byte would hold 19,000 × 0.15 ≈ 2,900 credits; the
      // wallet has 2,000 and the call costs 45 (the fake's usage).
      const { key, accountId } = await fx.fund(2_000);
      const content = (SAMPLES['english'] ?? '').repeat(200);
      assert.ok(Buffer.byteLength(content) * 150_000 > 2_000 * 1_000_000, 'the old bound would refuse it');
      const release = fx.a.pause();
      const open = fx.a.nextRequestOpen();
      const pending = fx.client(key).chat.completions.create({
        model: 'routed',
        messages: [{ role: 'user', content }],
        max_tokens: 10,
      });
      await open;
      const held = (await fx.svc.wallet(accountId)).held;
      release();
      const answer = await pending;
      // The hold still covers the real prompt at the input price, plus the output limit.
      assert.ok(held >= expectedCost(o200k(content), 10), `held ${held}`);
      assert.ok(held < 2_000n);
      assert.equal(answer.usage?.prompt_tokens, 100);
      assert.deepEqual(await fx.settled(accountId), { balance: 2_000n - expectedCost(100, 50), held: 0n });
    });

    it('is still refused for what it cannot pay', async () => {
      const { key } = await fx.fund(100);
      await assert.rejects(
        fx.client(key).chat.completions.create({
          model: 'routed',
          messages: [{ role: 'user', content: (SAMPLES['english'] ?? '').repeat(200) }],
          max_tokens: 10,
        }),
        (error: unknown) =>
          error instanceof OpenAI.APIError && error.status === 429 && error.code === 'insufficient_quota',
      );
      assert.equal(fx.a.requests.length, 1, 'no upstream contacted for the refused call');
    });
  });
});
