import assert from 'node:assert/strict';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { startFakeGeminiUpstream, type FakeGeminiUpstream } from '../fakes/gemini-upstream';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';

/*
 * Leaving never costs more than finishing, with a prompt the upstream read from its cache (SPEC §6,
 * issue 48 point 4, issue 42): a coding assistant's turn is mostly cache reads, so a client that
 * presses Esc mid-answer must not pay its whole prompt at the input price when finishing would have
 * paid a tenth. Where the upstream says the prompt's split before the end (Anthropic's
 * `message_start`, Gemini's running `usageMetadata`), the leaving charge uses it; where it cannot
 * (OpenAI chat gives usage only at the end), the prompt is priced at the tariff's cache-read rate.
 */

// Anthropic's ratios: reads at a tenth, five-minute writes at 1.25×, one-hour writes at 2× input.
const RATES = { input: 300_000n, read: 30_000n, write5m: 375_000n, write1h: 600_000n, output: 1_500_000n };
const PRICE = `input_per_1m: ${RATES.input}, output_per_1m: ${RATES.output}, cached_input_per_1m: ${RATES.read}, cache_write_per_1m: ${RATES.write5m}, cache_write_1h_per_1m: ${RATES.write1h}`;

interface Tiers {
  readonly uncached: number;
  readonly read: number;
  readonly write5m: number;
  readonly write1h: number;
  readonly output: number;
}

/** The tariff, written out apart from svc's pricing code: ceil(sum / 1e6), at least 1. */
function tariff(t: Tiers): bigint {
  const total =
    BigInt(t.uncached) * RATES.input +
    BigInt(t.read) * RATES.read +
    BigInt(t.write5m) * RATES.write5m +
    BigInt(t.write1h) * RATES.write1h +
    BigInt(t.output) * RATES.output;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

// The prompt's hold must cover every token the fakes report (samples/anthropic/stream-cache-tiers.sse
// says 10,603 prompt tokens), or the charge would be capped at the hold and hide the tariff.
const PROMPT = 'cache me '.repeat(6000);
/** svc's own count of PROMPT as one user message: 3 per request, 4 per message, the text. */
const PROMPT_TOKENS = 3 + 4 + countTokens(PROMPT);

async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 1000; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`never: ${what}`);
}

describe('leaving a stream whose prompt came from the cache never costs more than finishing it', function () {
  this.timeout(120_000);
  let anthropic: FakeAnthropicUpstream;
  let openai: FakeUpstream;
  let google: FakeGeminiUpstream;
  let svc: TestSvc;

  before(async () => {
    [anthropic, openai, google] = await Promise.all([
      startFakeAnthropicUpstream(),
      startFakeUpstream(),
      startFakeGeminiUpstream(),
    ]);
    const model = (name: string, upstream: string): string => `
  ${name}:
    price: { ${PRICE} }
    context_window: 200000
    max_output_tokens: 4000
${upstream}`;
    svc = await startSvc({
      config: `models:${model(
        'up-anthropic',
        `    provider: anthropic
    base_url: ${anthropic.baseUrl}
    api_key: ${FAKE_ANTHROPIC_KEY}
    upstream_model: claude-opus-4-8`,
      )}${model(
        'up-openai',
        `    provider: openai
    base_url: ${openai.baseUrl}
    upstream_model: gpt-cache`,
      )}${model(
        'up-gemini',
        `    provider: gemini
    base_url: ${google.baseUrl}
    api_key: test-gemini-secret
    upstream_model: gemini-2.5-flash`,
      )}
`,
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([anthropic?.close(), openai?.close(), google?.close()]);
  });

  /** Streams one call, reading until `mark` is in the text (then leaving) or to the end. */
  async function stream(
    k: FundedKey,
    wire: 'anthropic' | 'chat' | 'gemini',
    model: string,
    mark?: string,
  ): Promise<string> {
    const controller = new AbortController();
    const json = { 'content-type': 'application/json' };
    const request =
      wire === 'anthropic'
        ? {
            url: `${svc.baseUrl}/v1/anthropic/v1/messages`,
            headers: { ...json, 'x-api-key': k.key, 'anthropic-version': '2023-06-01' },
            body: { model, max_tokens: 1000, stream: true, messages: [{ role: 'user', content: PROMPT }] },
          }
        : wire === 'chat'
          ? {
              url: `${svc.baseUrl}/v1/openai/chat/completions`,
              headers: { ...json, authorization: `Bearer ${k.key}` },
              body: {
                model,
                max_tokens: 1000,
                stream: true,
                stream_options: { include_usage: true },
                messages: [{ role: 'user', content: PROMPT }],
              },
            }
          : {
              url: `${svc.baseUrl}/v1/gemini/v1beta/models/${model}:streamGenerateContent?alt=sse`,
              headers: { ...json, 'x-goog-api-key': k.key },
              body: {
                contents: [{ role: 'user', parts: [{ text: PROMPT }] }],
                generationConfig: { maxOutputTokens: 1000 },
              },
            };
    const res = await fetch(request.url, {
      method: 'POST',
      headers: request.headers,
      body: JSON.stringify(request.body),
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    if (mark === undefined) return res.text();
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    while (!seen.includes(mark)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before ${mark}: ${seen}`);
      seen += decoder.decode(value, { stream: true });
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    return seen;
  }

  /** The account's one charge, once the call has settled (its hold gone). */
  async function charged(k: FundedKey): Promise<bigint> {
    const wallet = await until(
      () => svc.wallet(k.accountId),
      (w) => w.held === 0n && w.balance < 1_000_000n,
      'the call settled',
    );
    const charges = (await svc.ledger(k.accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, 1, 'one charge');
    assert.equal(-(charges[0]?.amount ?? 0n), 1_000_000n - wallet.balance);
    return 1_000_000n - wallet.balance;
  }

  async function record(k: FundedKey) {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['status', 'cost', 'input_tokens', 'cached_tokens', 'cache_write_tokens', 'cache_write_1h_tokens', 'output_tokens'])
      .where('account_id', '=', k.accountId)
      .execute();
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    return {
      status: row.status,
      cost: BigInt(row.cost),
      input: Number(row.input_tokens),
      cached: Number(row.cached_tokens),
      write: Number(row.cache_write_tokens),
      write1h: Number(row.cache_write_1h_tokens),
      output: Number(row.output_tokens),
    };
  }

  // samples/anthropic/stream-cache-tiers.sse: message_start says 4 uncached, 1,800 read, 188
  // five-minute and 8,611 one-hour writes; the answer is "Every tier." (69 output tokens at the end).
  const ANTHROPIC: Tiers = { uncached: 4, read: 1800, write5m: 188, write1h: 8611, output: 69 };
  const HANDED = countTokens('Every tier.');

  for (const wire of ['anthropic', 'chat'] as const) {
    it(`onto an anthropic upstream, from the ${wire} wire: the prompt as message_start split it, the text handed counted`, async () => {
      const finished = await svc.createFundedKey(1_000_000);
      anthropic.enqueue({ sample: 'anthropic/stream-cache-tiers.sse' });
      await stream(finished, wire, 'up-anthropic');
      const finishing = await charged(finished);
      assert.equal(finishing, tariff(ANTHROPIC));

      // The same call, left once the text came: message_start and the delta, then the upstream thinks on.
      const left = await svc.createFundedKey(1_000_000);
      anthropic.enqueue({ cut: 'anthropic/stream-cache-tiers.sse', afterEvents: 3, stall: true });
      await stream(left, wire, 'up-anthropic', 'Every tier.');
      const leaving = await charged(left);
      assert.equal(leaving, tariff({ ...ANTHROPIC, output: HANDED }));
      assert.ok(leaving <= finishing, `leaving ${leaving} ≤ finishing ${finishing}`);
      assert.deepEqual(await record(left), {
        status: 'cancelled',
        cost: leaving,
        input: 4 + 1800 + 188 + 8611,
        cached: 1800,
        write: 188 + 8611,
        write1h: 8611,
        output: HANDED,
      });
    });
  }

  it('onto a gemini upstream: the prompt as the running usageMetadata split it', async () => {
    const usageMetadata = {
      promptTokenCount: 2000,
      cachedContentTokenCount: 1800,
      candidatesTokenCount: 3,
      totalTokenCount: 2003,
    };
    const frame = (text: string, done: boolean) =>
      `data: ${JSON.stringify({
        candidates: [
          { content: { parts: [{ text }], role: 'model' }, index: 0, ...(done ? { finishReason: 'STOP' } : {}) },
        ],
        usageMetadata: done ? { ...usageMetadata, candidatesTokenCount: 60, totalTokenCount: 2060 } : usageMetadata,
        modelVersion: 'gemini-2.5-flash',
        responseId: 'leave-cache-01',
      })}\r\n\r\n`;
    const finished = await svc.createFundedKey(1_000_000);
    google.next({ kind: 'sse-text', text: frame('Every ', false) + frame('tier.', true) });
    await stream(finished, 'gemini', 'up-gemini');
    const finishing = await charged(finished);
    assert.equal(finishing, tariff({ uncached: 200, read: 1800, write5m: 0, write1h: 0, output: 60 }));

    const left = await svc.createFundedKey(1_000_000);
    google.next({ kind: 'sse-text', text: frame('Every ', false), stall: true });
    await stream(left, 'gemini', 'up-gemini', 'Every ');
    const leaving = await charged(left);
    const handed = countTokens('Every ');
    assert.equal(leaving, tariff({ uncached: 200, read: 1800, write5m: 0, write1h: 0, output: handed }));
    assert.ok(leaving <= finishing, `leaving ${leaving} ≤ finishing ${finishing}`);
    const r = await record(left);
    assert.deepEqual([r.status, r.input, r.cached, r.output], ['cancelled', 2000, 1800, handed]);
  });

  it('onto an OpenAI chat upstream (usage only at the end): the prompt at the cache-read rate', async () => {
    const finished = await svc.createFundedKey(1_000_000);
    // Finishing: the upstream read all but the last 103 tokens of the prompt from its cache.
    const read = PROMPT_TOKENS - 103;
    openai.enqueue({
      kind: 'text',
      text: 'one two three four five six seven eight nine ten',
      usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: 10, cached_tokens: read },
    });
    await stream(finished, 'chat', 'up-openai');
    const finishing = await charged(finished);
    assert.equal(finishing, tariff({ uncached: 103, read, write5m: 0, write1h: 0, output: 10 }));

    const left = await svc.createFundedKey(1_000_000);
    openai.enqueue({ kind: 'stall', afterPieces: 3 });
    await stream(left, 'chat', 'up-openai', '"three "');
    const leaving = await charged(left);
    const handed = countTokens('one two three ');
    // svc's count of the prompt at the input price (the rule before) would cost more than finishing.
    assert.ok(tariff({ uncached: PROMPT_TOKENS, read: 0, write5m: 0, write1h: 0, output: handed }) > finishing);
    // svc cannot know the split: every prompt token at the read rate, the text at the output rate.
    assert.equal(leaving, tariff({ uncached: 0, read: PROMPT_TOKENS, write5m: 0, write1h: 0, output: handed }));
    assert.ok(leaving <= finishing, `leaving ${leaving} ≤ finishing ${finishing}`);
    // The record keeps svc's count as it is: no cache read the upstream never reported.
    const r = await record(left);
    assert.deepEqual([r.status, r.cost, r.input, r.cached, r.output], ['cancelled', leaving, PROMPT_TOKENS, 0, handed]);
  });

  it('a client that stops reading at the finish reason is charged as one that finished (the usage chunk comes after it)', async () => {
    const read = PROMPT_TOKENS - 103;
    const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: 10, cached_tokens: read };
    const finishing = tariff({ uncached: 103, read, write5m: 0, write1h: 0, output: 10 });
    const k = await svc.createFundedKey(1_000_000);
    // The upstream sends its usage chunk a while after the finish chunk (here: once the client has
    // had every word and 300 ms more). svc holds the finish chunk until the usage came, so the
    // client cannot see the answer end and leave in the gap to be charged the estimate instead.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    openai.enqueue({ kind: 'text', text: 'one two three four five six seven eight nine ten', usage, usageAfter: gate });
    const controller = new AbortController();
    const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${k.key}` },
      body: JSON.stringify({
        model: 'up-openai',
        max_tokens: 1000,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: PROMPT }],
      }),
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    let timer: NodeJS.Timeout | undefined;
    while (!seen.includes('"finish_reason":"stop"')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before its finish reason: ${seen}`);
      seen += decoder.decode(value, { stream: true });
      if (timer === undefined && seen.includes('"ten"')) timer = setTimeout(open, 300);
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);
    assert.equal(await charged(k), finishing);
    const r = await record(k);
    assert.deepEqual([r.cost, r.input, r.cached, r.output], [finishing, PROMPT_TOKENS, read, 10]);
  });
});
