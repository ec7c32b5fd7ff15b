import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import {
  geminiSample,
  geminiSampleText,
  startFakeGeminiUpstream,
  type FakeGeminiUpstream,
} from '../fakes/gemini-upstream';

const IN = 150_000n;
const OUT = 600_000n;
const EMBED_IN = 1_234_567n;

/** SPEC §6, apart from the code under test (cached input is priced as input until a cached price is configured). */
function cost(prompt: number, completion: number): bigint {
  const c = (BigInt(prompt) * IN + BigInt(completion) * OUT + 999_999n) / 1_000_000n;
  return c < 1n ? 1n : c;
}

function config(base: string): string {
  return `models:
  svc-gem:
    provider: gemini
    base_url: ${base}
    api_key: test-gemini-secret
    upstream_model: gemini-2.5-flash
    price: { input_per_1m: ${IN}, output_per_1m: ${OUT} }
    max_output_tokens: 1000
  svc-gem-embed:
    provider: gemini
    kind: embedding
    base_url: ${base}
    api_key: test-gemini-secret
    upstream_model: gemini-embedding-001
    dimensions: [7, 5]
    price: { input_per_1m: ${EMBED_IN} }
`;
}

describe('gemini upstream provider (recorded samples), through /v1/openai', function () {
  this.timeout(30_000);
  let upstream: FakeGeminiUpstream;
  let svc: TestSvc;
  let openaiFor: (key: string) => OpenAI;

  before(async () => {
    upstream = await startFakeGeminiUpstream();
    svc = await startSvc({ config: config(upstream.baseUrl) });
    openaiFor = (key) => new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
  });
  after(async () => {
    await svc.close();
    await upstream.close();
  });

  it('translates a chat request to generateContent and the thinking answer back, thoughts as reasoning', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-gem',
        messages: [
          { role: 'system', content: 'Answer in two words.' },
          { role: 'user', content: 'Where is Google headquartered?' },
        ],
        max_tokens: 100,
        temperature: 0.5,
        stop: ['END'],
        reasoning_effort: 'low',
      }),
    });
    const json = (await res.json()) as {
      choices: { message: { content: string; reasoning_content?: string }; finish_reason: string }[];
      usage: {
        prompt_tokens: number;
        completion_tokens: number;
        completion_tokens_details?: { reasoning_tokens: number };
      };
    };
    assert.equal(res.status, 200, JSON.stringify(json));
    assertSchema('CreateChatCompletionResponse', json);
    assert.equal(json.choices[0]?.message.content, 'Mountain View');
    assert.equal(json.choices[0]?.finish_reason, 'stop');
    // Recorded: 14 prompt + 2 candidates + 24 thoughts.
    assert.equal(json.usage.prompt_tokens, 14);
    assert.equal(json.usage.completion_tokens, 26);
    assert.equal(json.usage.completion_tokens_details?.reasoning_tokens, 24);
    assert.equal(res.headers.get('x-svc-cost'), String(cost(14, 26)));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost(14, 26));

    const seen = upstream.requests.at(-1);
    assert.equal(seen?.path, 'models/gemini-2.5-flash:generateContent');
    assert.equal(seen?.apiKey, 'test-gemini-secret');
    assert.deepEqual(seen?.body['systemInstruction'], { parts: [{ text: 'Answer in two words.' }] });
    assert.deepEqual(seen?.body['contents'], [{ role: 'user', parts: [{ text: 'Where is Google headquartered?' }] }]);
    assert.deepEqual(seen?.body['generationConfig'], {
      maxOutputTokens: 100,
      temperature: 0.5,
      stopSequences: ['END'],
      thinkingConfig: { thinkingBudget: 1024, includeThoughts: true },
    });
  });

  it('carries thought parts as reasoning (a Responses reasoning item; OpenAI chat has no field for it)', async () => {
    const { key } = await svc.createFundedKey(1_000_000);
    const response = await openaiFor(key).responses.create({ model: 'svc-gem', input: 'Where is Google?' });
    assert.equal(response.output_text, 'Mountain View');
    const reasoning = response.output.find((item) => item.type === 'reasoning');
    assert.ok(reasoning?.type === 'reasoning');
    assert.match(JSON.stringify(reasoning), /Thinking About Google's Headquarters/);
  });

  it('prices cached and thinking tokens from usageMetadata', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const answer = geminiSample('generate-content-thinking.json');
    const usage = { ...(answer['usageMetadata'] as object), promptTokenCount: 1200, cachedContentTokenCount: 1000 };
    upstream.next({ kind: 'json', body: { ...answer, usageMetadata: usage } });
    const result = await openaiFor(key).chat.completions.create({
      model: 'svc-gem',
      messages: [{ role: 'user', content: 'Where?' }],
    });
    assert.equal(result.usage?.prompt_tokens, 1200);
    assert.equal(result.usage?.prompt_tokens_details?.cached_tokens, 1000);
    assert.equal(result.usage?.completion_tokens, 26);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost(1200, 26));
  });

  it('streams a recorded SSE answer as chat chunks with the final usage charged', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const stream = await openaiFor(key).chat.completions.create({
      model: 'svc-gem',
      messages: [{ role: 'user', content: 'What is the capital of Wyoming?' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      assertSchema('CreateChatCompletionStreamResponse', chunk);
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, 'The capital of Wyoming is **Cheyenne**.\n');
    assert.equal(finish, 'stop');
    assert.equal(usage?.prompt_tokens, 7);
    assert.equal(usage?.completion_tokens, 10);
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.path, 'models/gemini-2.5-flash:streamGenerateContent');
    assert.equal(seen?.query, '?alt=sse');
    for (let i = 0; i < 100 && (await svc.wallet(accountId)).held !== 0n; i += 1)
      await new Promise((r) => setTimeout(r, 10));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost(7, 10));
  });

  it('streams the recorded thinking stream: MAX_TOKENS is length, thoughts are output tokens', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    upstream.next({ kind: 'sse', sample: 'stream-generate-content-thinking.sse.txt' });
    const stream = await openaiFor(key).chat.completions.create({
      model: 'svc-gem',
      messages: [{ role: 'user', content: 'Why is the sky blue?' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(finish, 'length');
    assert.equal(usage?.prompt_tokens, 7);
    assert.equal(usage?.completion_tokens, 153 + 45);
    assert.equal(usage?.completion_tokens_details?.reasoning_tokens, 45);
    for (let i = 0; i < 100 && (await svc.wallet(accountId)).held !== 0n; i += 1)
      await new Promise((r) => setTimeout(r, 10));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost(7, 198));
  });

  it('turns a functionCall into a tool call with an svc-made id, and the tool result into a functionResponse', async () => {
    const { key } = await svc.createFundedKey(1_000_000);
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: 'function',
        function: {
          name: 'customDivide',
          description: 'Divides',
          parameters: {
            type: 'object',
            properties: { numerator: { type: 'number' }, denominator: { type: 'number' } },
            required: ['numerator', 'denominator'],
          },
        },
      },
    ];
    upstream.next({ kind: 'json', sample: 'function-call.json' });
    const first = await openaiFor(key).chat.completions.create({
      model: 'svc-gem',
      messages: [{ role: 'user', content: 'What is 100 divided by 2?' }],
      tools,
      tool_choice: 'required',
    });
    const call = first.choices[0]?.message.tool_calls?.[0];
    assert.equal(first.choices[0]?.finish_reason, 'tool_calls');
    assert.ok(call?.type === 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'customDivide');
    assert.deepEqual(JSON.parse(call.function.arguments), { denominator: 2, numerator: 100 });
    const sent = upstream.requests.at(-1)?.body;
    assert.deepEqual(sent?.['toolConfig'], { functionCallingConfig: { mode: 'ANY' } });
    const declarations = (sent?.['tools'] as { functionDeclarations: { name: string }[] }[])[0]?.functionDeclarations;
    assert.equal(declarations?.[0]?.name, 'customDivide');

    await openaiFor(key).chat.completions.create({
      model: 'svc-gem',
      messages: [
        { role: 'user', content: 'What is 100 divided by 2?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: '{"result": 50}' },
      ],
      tools,
    });
    const contents = upstream.requests.at(-1)?.body['contents'] as { role: string; parts: unknown[] }[];
    assert.deepEqual(contents[1], {
      role: 'model',
      parts: [
        {
          functionCall: { name: 'customDivide', args: { denominator: 2, numerator: 100 } },
          thoughtSignature: 'skip_thought_signature_validator',
        },
      ],
    });
    assert.deepEqual(contents[2], {
      role: 'user',
      parts: [{ functionResponse: { name: 'customDivide', response: { result: 50 } } }],
    });
  });

  it('charges nothing for a stream that is cut before it finished or that ends in an error frame', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const firstFrame = geminiSampleText('stream-generate-content.sse.txt').split('\r\n\r\n')[0] ?? '';
    const errorFrame = `data: ${JSON.stringify(geminiSample('error-429-resource-exhausted.json'))}\r\n\r\n`;
    for (const text of [`${firstFrame}\r\n\r\n`, `${firstFrame}\r\n\r\n${errorFrame}`]) {
      upstream.next({ kind: 'sse-text', text });
      const stream = await openaiFor(key).chat.completions.create({
        model: 'svc-gem',
        messages: [{ role: 'user', content: 'What is the capital of Wyoming?' }],
        stream: true,
      });
      let content = '';
      const failure = await (async () => {
        for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
      })().catch((e: unknown) => e);
      assert.ok(failure instanceof Error, 'the stream ends in an error');
      assert.equal(content, 'The');
    }
    for (let i = 0; i < 100 && (await svc.wallet(accountId)).held !== 0n; i += 1)
      await new Promise((r) => setTimeout(r, 10));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n);
  });

  it('streams a Responses function call over the recorded functionCall answer', async () => {
    const { key } = await svc.createFundedKey(1_000_000);
    const frame = `data: ${JSON.stringify(geminiSample('function-call.json'))}\r\n\r\n`;
    upstream.next({ kind: 'sse-text', text: frame });
    const stream = await openaiFor(key).responses.create({
      model: 'svc-gem',
      input: 'What is 100 divided by 2?',
      tools: [
        {
          type: 'function',
          name: 'customDivide',
          strict: false,
          parameters: {
            type: 'object',
            properties: { numerator: { type: 'number' }, denominator: { type: 'number' } },
          },
        },
      ],
      stream: true,
    });
    let done: OpenAI.Responses.Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') done = event.response;
    const call = done?.output.find((item) => item.type === 'function_call');
    assert.ok(call?.type === 'function_call');
    assert.equal(call.name, 'customDivide');
    assert.deepEqual(JSON.parse(call.arguments), { denominator: 2, numerator: 100 });
    assert.equal(done?.usage?.input_tokens, 21);
    assert.equal(done?.usage?.output_tokens, 6);
  });

  it("maps Google's errors (429 with its retry delay, a refused svc key, a missing model) and charges nothing", async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const ask = (): Promise<unknown> =>
      openaiFor(key)
        .chat.completions.create({ model: 'svc-gem', messages: [{ role: 'user', content: 'hi' }] })
        .catch((e: unknown) => e);
    upstream.next({ kind: 'error', status: 429, sample: 'error-429-resource-exhausted.json' });
    const limited = await ask();
    assert.ok(limited instanceof OpenAI.RateLimitError);
    assert.equal(limited.headers.get('retry-after'), '56');
    upstream.next({ kind: 'error', status: 400, sample: 'error-400-api-key-invalid.json' });
    const badKey = await ask();
    assert.ok(badKey instanceof OpenAI.APIError);
    assert.equal(badKey.status, 502, 'svc own upstream key is not the client fault');
    assert.doesNotMatch(badKey.message, /key1234|API key not valid/);
    upstream.next({ kind: 'error', status: 404, sample: 'error-404-model-not-found.json' });
    // A model svc serves whose upstream model is missing is svc's misconfiguration: 502, not 404.
    const missing = await ask();
    assert.ok(missing instanceof OpenAI.APIError);
    assert.equal(missing.status, 502);
    assert.doesNotMatch(missing.message, /gemini-5\.0-flash/);
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n);
    assert.equal(wallet.held, 0n);
  });

  it('embeds over embedContent and batchEmbedContents with the recorded vectors, token ids decoded to text', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const client = openaiFor(key);
    const one = await client.embeddings.create({
      model: 'svc-gem-embed',
      input: 'What is the meaning of life?',
      encoding_format: 'float',
    });
    const recorded = (geminiSample('embed-content.json')['embedding'] as { values: number[] }).values;
    assert.deepEqual(one.data[0]?.embedding, recorded);
    const seenOne = upstream.requests.at(-1);
    assert.equal(seenOne?.path, 'models/gemini-embedding-001:embedContent');
    assert.deepEqual(seenOne?.body['content'], { parts: [{ text: 'What is the meaning of life?' }] });
    const tokens = countTokens('What is the meaning of life?');
    assert.equal(one.usage.prompt_tokens, tokens);

    const texts = ['first text', 'second text', 'third text'];
    const many = await client.embeddings.create({
      model: 'svc-gem-embed',
      input: texts,
      dimensions: 5,
      encoding_format: 'float',
    });
    const batch = (geminiSample('batch-embed-contents.json')['embeddings'] as { values: number[] }[]).map(
      (e) => e.values,
    );
    assert.deepEqual(
      many.data.map((d) => d.embedding),
      batch,
    );
    const seenMany = upstream.requests.at(-1);
    assert.equal(seenMany?.path, 'models/gemini-embedding-001:batchEmbedContents');
    const requests = seenMany?.body['requests'] as { model: string; outputDimensionality: number }[];
    assert.equal(requests.length, 3);
    assert.equal(requests[0]?.model, 'models/gemini-embedding-001');
    assert.equal(requests[0]?.outputDimensionality, 5);

    await client.embeddings.create({
      model: 'svc-gem-embed',
      input: [[15339, 1917], [15339]],
      encoding_format: 'float',
    });
    const decoded = (upstream.requests.at(-1)?.body['requests'] as { content: unknown }[]).map((r) => r.content);
    assert.deepEqual(decoded, [{ parts: [{ text: 'hello world' }] }, { parts: [{ text: 'hello' }] }]);

    const manyTokens = texts.reduce((s, t) => s + countTokens(t), 0);
    const price = (n: number): bigint => {
      const c = (BigInt(n) * EMBED_IN + 999_999n) / 1_000_000n;
      return c < 1n ? 1n : c;
    };
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - price(tokens) - price(manyTokens) - price(3));
  });
});
