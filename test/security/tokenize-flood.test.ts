import assert from 'node:assert/strict';
import { countTokensLinear } from '../../core/providers/llm/tokens';
import { tokenizedBytes } from '../../core/providers/llm/token-worker';
import { MAX_EMBEDDING_REQUEST_TOKENS } from '../../core/embeddings/runner';
import { startSvc, type TestSvc } from '../helpers/harness';

// Issue 31, finding 5: tokenizing was free CPU for anyone with a key. A zero-credit key's 900 kB
// of long words cost 960 ms of the core's event loop before the 429; count_tokens, input_tokens
// and chat refused for credit cost 230-270 ms per 250 kB. Here the tokenizer's own tally
// (`tokenizedBytes`, every text handed to it in this process) shows what a call counted: a
// refused call must count nothing, and no call more than the per-request budget.

/** Long "words": the worst case of cl100k_base's BPE (runs of letters with no space). */
function longWords(bytes: number): string {
  const word = 'abcdefghijklmnopqrstuvwxyz'.repeat(40); // 1040 letters, no break
  let out = '';
  while (out.length < bytes) out += `${word} `;
  return out.slice(0, bytes);
}

const CONFIG = `models:
  svc-pro:
    provider: sandbox
    price: { input_per_1m: 150000, output_per_1m: 600000 }
  svc-embed:
    provider: sandbox
    kind: embedding
    dimensions: [16]
    context_window: 8191
    price: { input_per_1m: 20000 }
limits:
  max_body_bytes: 1048576
  count_requests_per_minute: 3
`;

async function post(svc: TestSvc, path: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${svc.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text };
}

describe('tokenizing only what can be paid for (issue 31)', function () {
  this.timeout(60_000);
  let svc: TestSvc;

  before(async () => {
    svc = await startSvc({ config: CONFIG });
  });
  after(async () => svc?.close());

  /** What the tokenizer counted while `run` ran. */
  async function counted(run: () => Promise<unknown>): Promise<number> {
    const before = tokenizedBytes();
    await run();
    return tokenizedBytes() - before;
  }

  it('a zero-credit key posting 900 kB of long words to embeddings is refused before the tokenizer runs', async () => {
    const { key } = await svc.createFundedKey(0, 'zero');
    // Twenty-two inputs of 40 kB: each longer than the context window in bytes, so each would be counted.
    const input = Array.from({ length: 22 }, () => longWords(40_000));
    let reply: { status: number; body: string } | undefined;
    const bytes = await counted(async () => {
      reply = await post(svc, '/v1/openai/embeddings', key, { model: 'svc-embed', input });
    });
    assert.equal(reply?.status, 429, reply?.body);
    assert.match(reply?.body ?? '', /insufficient|credit/i);
    assert.equal(bytes, 0, 'nothing was tokenized for a caller who cannot pay');
  });

  it('the same for Gemini batchEmbedContents and a 250 kB chat call', async () => {
    const { key } = await svc.createFundedKey(0, 'zero-2');
    const text = longWords(250_000);
    const gemini = await counted(async () => {
      const r = await post(
        svc,
        '/v1/gemini/v1beta/models/svc-embed:batchEmbedContents',
        key,
        { requests: [{ model: 'models/svc-embed', content: { parts: [{ text }] } }] },
        { 'x-goog-api-key': key },
      );
      assert.equal(r.status, 429, r.body);
    });
    const chat = await counted(async () => {
      const r = await post(svc, '/v1/openai/chat/completions', key, {
        model: 'svc-pro',
        max_tokens: 16,
        messages: [{ role: 'user', content: text }],
      });
      assert.equal(r.status, 429, r.body);
    });
    assert.equal(gemini, 0);
    assert.equal(chat, 0);
  });

  it('count_tokens, countTokens and input_tokens do not run the tokenizer, and have their own rate limit', async () => {
    const { key } = await svc.createFundedKey(1_000_000, 'counting');
    const text = longWords(250_000);
    const bytes = await counted(async () => {
      const a = await post(svc, '/v1/anthropic/v1/messages/count_tokens', key, {
        model: 'svc-pro',
        messages: [{ role: 'user', content: text }],
      });
      assert.equal(a.status, 200, a.body);
      const g = await post(
        svc,
        '/v1/gemini/v1beta/models/svc-pro:countTokens',
        key,
        { contents: [{ parts: [{ text }] }] },
        { 'x-goog-api-key': key },
      );
      assert.equal(g.status, 200, g.body);
      const r = await post(svc, '/v1/openai/responses/input_tokens', key, { model: 'svc-pro', input: text });
      assert.equal(r.status, 200, r.body);
    });
    assert.equal(bytes, 0);
    // The fourth free call in the minute is refused (limits.count_requests_per_minute: 3)...
    const fourth = await post(svc, '/v1/anthropic/v1/messages/count_tokens', key, {
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(fourth.status, 429, fourth.body);
    assert.match(fourth.body, /token counting/);
    // ...while the same key's paid calls keep their own budget.
    const chat = await post(svc, '/v1/openai/chat/completions', key, {
      model: 'svc-pro',
      max_tokens: 8,
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(chat.status, 200, chat.body);
  });

  it('a paying caller is counted exactly up to 256 KiB per request, by bytes beyond it', async () => {
    const { key } = await svc.createFundedKey(100_000_000, 'paying');
    // 40 kB of prose-like text: 40 kB of bytes is more than the 8191-token window, its count is not.
    const prose = 'the quick brown fox jumps over the lazy dog '.repeat(900);
    let usage = { prompt_tokens: 0 };
    const one = await counted(async () => {
      const r = await post(svc, '/v1/openai/embeddings', key, { model: 'svc-embed', input: [prose] });
      assert.equal(r.status, 200, r.body);
      usage = (JSON.parse(r.body) as { usage: typeof usage }).usage;
    });
    assert.equal(usage.prompt_tokens, countTokensLinear(prose));
    // Counted once for the check and once by the sandbox for its usage: never more than twice the text.
    assert.ok(one > 0 && one <= 2 * Buffer.byteLength(prose), String(one));
    // Seven such texts (280 kB) pass the per-request budget: the last one is refused by its bytes,
    // with a message saying why; what was counted stays within the budget.
    const seven = Array.from({ length: 7 }, () => prose);
    const bytes = await counted(async () => {
      const r = await post(svc, '/v1/openai/embeddings', key, { model: 'svc-embed', input: seven });
      assert.equal(r.status, 400, r.body);
      assert.match(r.body, /input\[6\]/);
      assert.match(r.body, /262144 bytes of text per request/);
    });
    assert.ok(bytes <= 256 * 1024, `${bytes} bytes counted`);
    assert.ok(MAX_EMBEDDING_REQUEST_TOKENS > 0);
  });
});
