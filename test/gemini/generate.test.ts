import assert from 'node:assert/strict';
import http from 'node:http';
import { ApiError, FunctionCallingConfigMode, type Content } from '@google/genai';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { configB } from '../mcp/helpers';
import { expectedCost } from '../openai/fixture';
import { startGeminiFixture, type GeminiFixture } from './fixture';

type Json = Record<string, unknown>;

/*
 * The official `@google/genai` SDK against svc's Gemini-compatible API (SPEC §7c), served over an
 * OpenAI-compatible chat upstream (the fake) and the offline sandbox model.
 */
describe('Gemini API (@google/genai against /v1/gemini)', function () {
  this.timeout(30_000);
  let fx: GeminiFixture;
  let tools: FakeToolProviders;

  before(async () => {
    tools = await startFakeToolProviders();
    fx = await startGeminiFixture({ extraConfig: () => configB(tools) });
  });
  beforeEach(() => {
    fx.upstream.reset();
    tools.set('searxng', 'ok');
  });
  after(async () => {
    await fx?.close();
    await tools?.close();
  });

  it('generateContent: the answer, usageMetadata as charged, x-svc-cost, and the request translated', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Cheyenne.', usage: { prompt_tokens: 20, completion_tokens: 7 } });
    const response = await fx.genai(key).models.generateContent({
      model: 'svc-pro',
      contents: 'What is the capital of Wyoming?',
      config: {
        systemInstruction: 'Answer in one word.',
        maxOutputTokens: 50,
        temperature: 0.5,
        topP: 0.9,
        stopSequences: ['END'],
      },
    });
    assert.equal(response.text, 'Cheyenne.');
    assert.equal(response.candidates?.[0]?.finishReason, 'STOP');
    assert.equal(response.candidates?.[0]?.content?.role, 'model');
    assert.equal(response.modelVersion, 'svc-pro');
    assert.ok(response.responseId);
    assert.deepEqual(
      {
        prompt: response.usageMetadata?.promptTokenCount,
        candidates: response.usageMetadata?.candidatesTokenCount,
        total: response.usageMetadata?.totalTokenCount,
      },
      { prompt: 20, candidates: 7, total: 27 },
    );
    const cost = expectedCost(20, 7);
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-cost'], String(cost));
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-balance'], String(1_000_000n - cost));
    assert.equal(await fx.balance(accountId), 1_000_000n - cost);
    const sent = fx.upstream.requests[0]?.body as Json;
    assert.deepEqual(sent['messages'], [
      { role: 'system', content: 'Answer in one word.' },
      { role: 'user', content: 'What is the capital of Wyoming?' },
    ]);
    assert.equal(sent['max_tokens'], 50);
    assert.equal(sent['temperature'], 0.5);
    assert.equal(sent['top_p'], 0.9);
    assert.deepEqual(sent['stop'], ['END']);
  });

  it('issue 30: an upstream without usage is served, charged from svc’s count, and usageMetadata says estimated', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Counted.', usage: 'omit' });
    const response = await fx.genai(key).models.generateContent({
      model: 'svc-pro',
      contents: 'Count me',
      config: { maxOutputTokens: 50 },
    });
    assert.equal(response.text, 'Counted.');
    const meta = response.usageMetadata as unknown as Json;
    assert.equal(meta['estimated'], true);
    const cost = expectedCost(Number(meta['promptTokenCount']), Number(meta['candidatesTokenCount']));
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-cost'], String(cost));
    assert.equal(await fx.balance(accountId), 1_000_000n - cost);

    fx.upstream.enqueue({ kind: 'text', text: 'Counted.', usage: 'omit' });
    let text = '';
    let last: Json | undefined;
    for await (const frame of await fx.genai(key).models.generateContentStream({
      model: 'svc-pro',
      contents: 'Count me',
      config: { maxOutputTokens: 50 },
    })) {
      text += frame.text ?? '';
      if (frame.usageMetadata !== undefined) last = frame.usageMetadata as unknown as Json;
    }
    assert.equal(text, 'Counted.');
    assert.equal(last?.['estimated'], true);
  });

  it('the same route under v1/ and with the key as ?key= or a bearer token', async () => {
    const { key } = await fx.fund(1_000_000);
    const v1 = await fx.genai(key, 'v1').models.generateContent({ model: 'svc-sandbox', contents: 'hi' });
    assert.match(v1.text ?? '', /sandbox/);
    const body = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
    const query = await fetch(`${fx.geminiURL}/v1beta/models/svc-sandbox:generateContent?key=${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(query.status, 200);
    const bearer = await fetch(`${fx.geminiURL}/v1beta/models/svc-sandbox:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
    });
    assert.equal(bearer.status, 200);
  });

  it('streamGenerateContent (?alt=sse): text frames, then the finish and the charged usage in the last', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'The capital of Wyoming is Cheyenne.',
      reasoning: 'Wyoming… its capital…',
      usage: { prompt_tokens: 30, completion_tokens: 12, reasoning_tokens: 4 },
    });
    const stream = await fx.genai(key).models.generateContentStream({
      model: 'svc-pro',
      contents: 'Capital of Wyoming?',
      config: { thinkingConfig: { includeThoughts: true } },
    });
    let text = '';
    let thoughts = '';
    const chunks = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      for (const part of chunk.candidates?.[0]?.content?.parts ?? []) {
        if (part.thought === true) thoughts += part.text ?? '';
        else text += part.text ?? '';
      }
    }
    assert.ok(chunks.length > 2, `${chunks.length} frames`);
    assert.equal(text, 'The capital of Wyoming is Cheyenne.');
    assert.equal(thoughts, 'Wyoming… its capital…');
    const last = chunks.at(-1);
    assert.equal(last?.candidates?.[0]?.finishReason, 'STOP');
    assert.equal(last?.usageMetadata?.promptTokenCount, 30);
    assert.equal(last?.usageMetadata?.candidatesTokenCount, 8);
    assert.equal(last?.usageMetadata?.thoughtsTokenCount, 4);
    assert.equal(last?.usageMetadata?.totalTokenCount, 42);
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 1_000_000n - expectedCost(30, 12));
    assert.equal(fx.upstream.requests[0]?.body['stream'], true);
  });

  it("a stream's cost and balance arrive as HTTP trailers (x-svc-cost, x-svc-balance)", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Streamed.', usage: { prompt_tokens: 40, completion_tokens: 5 } });
    const url = new URL(`${fx.geminiURL}/v1beta/models/svc-pro:streamGenerateContent?alt=sse`);
    const { body, trailers, headers } = await new Promise<{
      body: string;
      trailers: NodeJS.Dict<string>;
      headers: http.IncomingHttpHeaders;
    }>((resolve, reject) => {
      const req = http.request(
        url,
        { method: 'POST', headers: { 'content-type': 'application/json', 'x-goog-api-key': key } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ body: text, trailers: res.trailers, headers: res.headers }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'stream please' }] }] }));
    });
    assert.match(body, /^data: /);
    assert.ok(body.endsWith('\r\n\r\n'), 'only data frames, CRLF CRLF ended');
    assert.equal(headers['trailer'], 'x-svc-cost, x-svc-balance');
    const cost = expectedCost(40, 5);
    assert.equal(trailers['x-svc-cost'], String(cost));
    assert.equal(trailers['x-svc-balance'], String(1_000_000n - cost));
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n - cost);
  });

  it('streamGenerateContent without alt=sse streams one JSON array of responses', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'One two three.', usage: { prompt_tokens: 10, completion_tokens: 3 } });
    const res = await fetch(`${fx.geminiURL}/v1beta/models/svc-pro:streamGenerateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Count' }] }] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    const frames = JSON.parse(await res.text()) as Json[];
    assert.ok(Array.isArray(frames) && frames.length >= 2);
    const text = frames
      .map((f) => (f['candidates'] as Json[])[0]?.['content'] as Json)
      .flatMap((c) => c['parts'] as Json[])
      .map((p) => String(p['text'] ?? ''))
      .join('');
    assert.equal(text, 'One two three.');
    assert.deepEqual((frames.at(-1)?.['usageMetadata'] as Json)['totalTokenCount'], 13);
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n - expectedCost(10, 3));
  });

  it('function calling round trip: functionCall out, functionResponse back as the tool message of that call', async () => {
    const { key } = await fx.fund(1_000_000);
    const ai = fx.genai(key);
    const declaration = {
      name: 'customDivide',
      description: 'Divides two numbers.',
      parameters: {
        type: 'OBJECT',
        properties: { numerator: { type: 'NUMBER' }, denominator: { type: 'NUMBER', nullable: true } },
        required: ['numerator', 'denominator'],
      },
    };
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_div_1', name: 'customDivide', arguments: '{"numerator":100,"denominator":2}' }],
        usage: { prompt_tokens: 21, completion_tokens: 6 },
      },
      { kind: 'text', text: '100 / 2 = 50.', usage: { prompt_tokens: 40, completion_tokens: 8 } },
    );
    const config = {
      tools: [{ functionDeclarations: [declaration] }],
      toolConfig: {
        functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['customDivide'] },
      },
    };
    const question: Content = { role: 'user', parts: [{ text: 'What is 100 divided by 2?' }] };
    const first = await ai.models.generateContent({ model: 'svc-pro', contents: [question], config: config as never });
    const call = first.functionCalls?.[0];
    assert.equal(call?.name, 'customDivide');
    assert.deepEqual(call?.args, { numerator: 100, denominator: 2 });
    assert.equal(first.candidates?.[0]?.finishReason, 'STOP');
    const sent = fx.upstream.requests[0]?.body as Json;
    const fn = (sent['tools'] as Json[])[0]?.['function'] as Json;
    assert.deepEqual(fn['parameters'], {
      type: 'object',
      properties: { numerator: { type: 'number' }, denominator: { type: ['number', 'null'] } },
      required: ['numerator', 'denominator'],
    });
    assert.deepEqual(sent['tool_choice'], { type: 'function', function: { name: 'customDivide' } });

    // Back as Gemini CLI sends it: its own id on the call, a thoughtSignature, {output} as the response.
    const second = await ai.models.generateContent({
      model: 'svc-pro',
      contents: [
        question,
        {
          role: 'model',
          parts: [
            {
              functionCall: { id: 'customDivide_1795596401557_0', name: 'customDivide', args: call?.args ?? {} },
              thoughtSignature: 'skip_thought_signature_validator',
            },
          ],
        },
        {
          role: 'user',
          parts: [
            {
              functionResponse: {
                id: 'customDivide_1795596401557_0',
                name: 'customDivide',
                response: { output: '50' },
              },
            },
          ],
        },
      ],
      config: { tools: config.tools as never },
    });
    assert.equal(second.text, '100 / 2 = 50.');
    const messages = fx.upstream.requests[1]?.body['messages'] as Json[];
    assert.deepEqual(
      messages.map((m) => m['role']),
      ['user', 'assistant', 'tool'],
    );
    const assistantCalls = messages[1]?.['tool_calls'] as Json[];
    assert.equal(assistantCalls[0]?.['id'], 'customDivide_1795596401557_0');
    assert.deepEqual(messages[2], { role: 'tool', tool_call_id: 'customDivide_1795596401557_0', content: '50' });
  });

  it('a streamed function call arrives whole in the last frame', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [{ id: 'call_g', name: 'glob', arguments: '{"pattern":"**/*.ts"}' }],
      usage: { prompt_tokens: 50, completion_tokens: 9 },
    });
    const stream = await fx.genai(key).models.generateContentStream({
      model: 'svc-pro',
      contents: 'List the TypeScript files',
      config: {
        tools: [
          {
            functionDeclarations: [
              {
                name: 'glob',
                description: 'Finds files',
                parametersJsonSchema: { type: 'object', properties: { pattern: { type: 'string' } } },
              },
            ],
          },
        ],
      },
    });
    const calls = [];
    for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
    assert.equal(calls.length, 1);
    assert.equal(calls[0]?.name, 'glob');
    assert.deepEqual(calls[0]?.args, { pattern: '**/*.ts' });
  });

  it('countTokens is free and counts what the core would send', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const small = await fx.genai(key).models.countTokens({ model: 'svc-pro', contents: 'hi' });
    const large = await fx.genai(key).models.countTokens({
      model: 'svc-pro',
      contents: 'The quick brown fox jumps over the lazy dog. '.repeat(20),
    });
    assert.ok((small.totalTokens ?? 0) > 0);
    assert.ok((large.totalTokens ?? 0) > (small.totalTokens ?? 0) + 50);
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 1_000_000n);
  });

  it('list and get models: the account’s models as models/NAME; an unknown one is 404 NOT_FOUND', async () => {
    const { key } = await fx.fund(1_000);
    const ai = fx.genai(key);
    const names: string[] = [];
    for await (const m of await ai.models.list()) names.push(m.name ?? '');
    assert.ok(names.includes('models/svc-pro'), names.join());
    assert.ok(names.includes('models/svc-sandbox'), names.join());
    const one = await ai.models.get({ model: 'svc-pro' });
    assert.equal(one.name, 'models/svc-pro');
    assert.equal(one.outputTokenLimit, 1000);
    await assert.rejects(ai.models.get({ model: 'no-such-model' }), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 404);
      assert.match(e.message, /NOT_FOUND/);
      return true;
    });
  });

  it("Gemini CLI's model names reach the default model; a configured name is served as itself", async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'aliased', usage: { prompt_tokens: 5, completion_tokens: 1 } });
    const r = await fx.genai(key).models.generateContent({ model: 'gemini-3.8-flash', contents: 'hi' });
    assert.equal(r.text, 'aliased');
    assert.equal(r.modelVersion, 'svc-pro');
    await assert.rejects(
      fx.genai(key).models.generateContent({ model: 'claude-x', contents: 'hi' }),
      (e: unknown) => e instanceof ApiError && e.status === 404,
    );
  });

  it("the classifier's JSON schema gets schema-valid JSON from the sandbox model", async () => {
    const { key } = await fx.fund(1_000_000);
    const r = await fx.genai(key).models.generateContent({
      model: 'svc-sandbox',
      contents: 'Refactor the whole repository to use ESM',
      config: {
        responseMimeType: 'application/json',
        responseJsonSchema: {
          type: 'object',
          properties: {
            complexity_reasoning: { type: 'string' },
            complexity_score: { type: 'integer', minimum: 1, maximum: 100 },
          },
          required: ['complexity_reasoning', 'complexity_score'],
        },
        thinkingConfig: { includeThoughts: true, thinkingLevel: 'HIGH' as never },
      },
    });
    const value = JSON.parse(r.text ?? '') as Json;
    assert.equal(typeof value['complexity_reasoning'], 'string');
    assert.ok(Number.isInteger(value['complexity_score']) && Number(value['complexity_score']) >= 1);
    assert.match(r.sdkHttpResponse?.headers?.['x-svc-ignored-fields'] ?? '', /thinkingLevel/);
  });

  it('responseSchema (Google Schema) goes upstream as a json_schema response format', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: '{"city":"Cheyenne"}',
      usage: { prompt_tokens: 9, completion_tokens: 5 },
    });
    const r = await fx.genai(key).models.generateContent({
      model: 'svc-pro',
      contents: 'Capital of Wyoming as JSON',
      config: {
        responseMimeType: 'application/json',
        responseSchema: { type: 'OBJECT' as never, properties: { city: { type: 'STRING' as never } } },
      },
    });
    assert.deepEqual(JSON.parse(r.text ?? ''), { city: 'Cheyenne' });
    assert.deepEqual(fx.upstream.requests[0]?.body['response_format'], {
      type: 'json_schema',
      json_schema: {
        name: 'response',
        schema: { type: 'object', properties: { city: { type: 'string' } } },
        strict: false,
      },
    });
  });

  it("googleSearch is served by svc's web_search: groundingMetadata, the search billed at its tariff", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const before = tools.requestsTo('searxng').length;
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_ws', name: 'web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 40, completion_tokens: 10 },
      },
      {
        kind: 'text',
        text: 'See https://fastapi.tiangolo.com/release-notes/ for the notes.',
        usage: { prompt_tokens: 300, completion_tokens: 20 },
      },
    );
    const r = await fx.genai(key).models.generateContent({
      model: 'gemini-3-flash-preview',
      contents: 'fastapi release notes',
      config: { tools: [{ googleSearch: {} }], temperature: 0, topP: 1 },
    });
    assert.equal(r.text, 'See https://fastapi.tiangolo.com/release-notes/ for the notes.');
    const g = r.candidates?.[0]?.groundingMetadata;
    assert.deepEqual(g?.webSearchQueries, ['fastapi release notes']);
    assert.equal(g?.groundingChunks?.[0]?.web?.uri, 'https://fastapi.tiangolo.com/release-notes/');
    assert.equal(g?.groundingChunks?.[0]?.web?.title, 'Release Notes - FastAPI');
    assert.equal(g?.groundingSupports?.[0]?.segment?.text, 'https://fastapi.tiangolo.com/release-notes/');
    assert.deepEqual(g?.groundingSupports?.[0]?.groundingChunkIndices, [0]);
    assert.equal(tools.requestsTo('searxng').length, before + 1);
    assert.equal(r.usageMetadata?.promptTokenCount, 340);
    const records = await fx.usage(accountId);
    // The core runs it as a Responses request with its hosted web_search: two model turns and one
    // search inside one hold, settled once (one record: the turns' tokens, the search's price too).
    assert.deepEqual(records.map((x) => x.kind), ['responses']);
    assert.deepEqual([records[0]?.inputTokens, records[0]?.outputTokens], [340, 30]);
    const total = records.reduce((s, x) => s + x.cost, 0n);
    assert.equal(total, 150n + expectedCost(40, 10) + expectedCost(300, 20));
    assert.equal(r.sdkHttpResponse?.headers?.['x-svc-cost'], String(total));
    assert.equal(await fx.balance(accountId), 1_000_000n - total);
  });

  it('a googleSearch that finds nothing costs only the model turns', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    tools.set('searxng', 'empty');
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_ws', name: 'web_search', arguments: '{"query":"zzqx nothing"}' }],
        usage: { prompt_tokens: 40, completion_tokens: 10 },
      },
      { kind: 'text', text: 'Nothing found.', usage: { prompt_tokens: 60, completion_tokens: 4 } },
    );
    const r = await fx.genai(key).models.generateContent({
      model: 'svc-pro',
      contents: 'zzqx nothing',
      config: { tools: [{ googleSearch: {} }] },
    });
    assert.equal(r.text, 'Nothing found.');
    assert.equal(r.candidates?.[0]?.groundingMetadata?.groundingChunks?.length ?? 0, 0);
    const records = await fx.usage(accountId);
    assert.equal(records.find((x) => x.kind === 'tool')?.cost ?? 0n, 0n);
    assert.equal(await fx.balance(accountId), 1_000_000n - expectedCost(40, 10) - expectedCost(60, 4));
  });

  it('a googleSearch whose answer turn fails returns the search done, finishReason OTHER, charged what it carries', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    tools.set('searxng', 'ok');
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_ws', name: 'web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 40, completion_tokens: 10 },
      },
      { kind: 'http_error', status: 500 },
    );
    const r = await fx.genai(key).models.generateContent({
      model: 'svc-pro',
      contents: 'fastapi release notes',
      config: { tools: [{ googleSearch: {} }] },
    });
    assert.equal(r.candidates?.[0]?.finishReason, 'OTHER');
    assert.deepEqual(r.candidates?.[0]?.groundingMetadata?.webSearchQueries, ['fastapi release notes']);
    const cost = 150n + expectedCost(40, 10);
    assert.equal(r.sdkHttpResponse?.headers?.['x-svc-cost'], String(cost));
    assert.equal(r.usageMetadata?.promptTokenCount, 40);
    const w = await fx.settled(accountId);
    assert.deepEqual([w.balance, w.held], [1_000_000n - cost, 0n]);
  });

  it('a wallet that cannot cover an explicit maxOutputTokens is told so in the Gemini API’s words', async () => {
    const { key, accountId } = await fx.fund(5);
    await assert.rejects(
      fx.genai(key).models.generateContent({
        model: 'svc-pro',
        contents: 'hello',
        config: { maxOutputTokens: 500 },
      }),
      (e: Error) =>
        /RESOURCE_EXHAUSTED/.test(e.message) &&
        /a lower maxOutputTokens reserves less/.test(e.message) &&
        !/max_tokens/.test(e.message),
    );
    assert.equal(await fx.balance(accountId), 5n);
  });
});
