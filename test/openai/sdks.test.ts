import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { type AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

describe('OpenAI API: other clients', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('Vercel AI SDK (ai 6, @ai-sdk/openai 3, /responses): a streamed call with a tool, over two steps', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_v1', name: 'get_weather', arguments: '{"city":"Isfahan"}' }],
        usage: { prompt_tokens: 60, completion_tokens: 15 },
      },
      { kind: 'text', text: 'Isfahan: 25 degrees and clear.', usage: { prompt_tokens: 95, completion_tokens: 9 } },
    );
    const openai = createOpenAI({ baseURL: fx.baseURL, apiKey: key });
    const calls: unknown[] = [];
    const result = streamText({
      model: openai('svc-pro'),
      prompt: 'What is the weather in Isfahan?',
      tools: {
        get_weather: tool({
          description: 'Current weather of a city',
          inputSchema: jsonSchema<{ city: string }>({
            type: 'object',
            properties: { city: { type: 'string' } },
            required: ['city'],
            additionalProperties: false,
          }),
          execute: ({ city }) => {
            calls.push(city);
            return Promise.resolve({ city, celsius: 25 });
          },
        }),
      },
      stopWhen: stepCountIs(3),
    });
    let text = '';
    for await (const delta of result.textStream) text += delta;
    assert.equal(text, 'Isfahan: 25 degrees and clear.');
    assert.deepEqual(calls, ['Isfahan']);
    assert.equal(fx.upstream.requests.length, 2);
    assert.match(fx.upstream.requests[0]?.headers['accept'] ?? '', /event-stream/);
    const second = fx.upstream.requests[1]?.body['messages'] as {
      role: string;
      tool_call_id?: string;
      content?: unknown;
    }[];
    assert.deepEqual(
      second.map((m) => m.role),
      ['user', 'assistant', 'tool'],
    );
    assert.equal(second[2]?.tool_call_id, 'call_v1');
    assert.match(String(second[2]?.content), /25/);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(60, 15) - expectedCost(95, 9));
  });

  it('Vercel AI SDK: a second turn sends the earlier answer as an item_reference, which svc resolves', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Hello, I remember things.' }, { kind: 'text', text: 'You said hi.' });
    const openai = createOpenAI({ baseURL: fx.baseURL, apiKey: key });
    const first = streamText({ model: openai('svc-pro'), prompt: 'hi' });
    await first.consumeStream();
    const history = [
      { role: 'user' as const, content: 'hi' },
      ...(await first.response).messages,
      { role: 'user' as const, content: 'What did I say?' },
    ];
    const second = streamText({ model: openai('svc-pro'), messages: history });
    assert.equal(await second.text, 'You said hi.');
    assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello, I remember things.' },
      { role: 'user', content: 'What did I say?' },
    ]);
  });

  it('LangChain (@langchain/openai 1.4, chat completions): a streamed call with a tool, then the answer', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_l1', name: 'get_weather', arguments: '{"city":"Mashhad"}' }],
        usage: { prompt_tokens: 55, completion_tokens: 14 },
      },
      { kind: 'text', text: 'Mashhad is cool today.', usage: { prompt_tokens: 88, completion_tokens: 6 } },
    );
    const model = new ChatOpenAI({
      model: 'svc-pro',
      apiKey: key,
      configuration: { baseURL: fx.baseURL },
      streaming: true,
      maxRetries: 0,
    }).bindTools([
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Current weather of a city',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ]);
    const history: BaseMessage[] = [new HumanMessage('Weather in Mashhad?')];
    let first: AIMessageChunk | undefined;
    for await (const chunk of await model.stream(history)) first = first === undefined ? chunk : first.concat(chunk);
    assert.ok(first);
    assert.deepEqual(
      first.tool_calls?.map((c) => [c.id, c.name, c.args]),
      [['call_l1', 'get_weather', { city: 'Mashhad' }]],
    );
    history.push(first, new ToolMessage({ tool_call_id: 'call_l1', content: '{"celsius":14}' }));
    let answer = '';
    for await (const chunk of await model.stream(history))
      answer += typeof chunk.content === 'string' ? chunk.content : '';
    assert.equal(answer, 'Mashhad is cool today.');
    assert.equal(fx.upstream.requests[0]?.body['stream'], true);
    const second = fx.upstream.requests[1]?.body['messages'] as { role: string }[];
    assert.deepEqual(
      second.map((m) => m.role),
      ['user', 'assistant', 'tool'],
    );
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(55, 14) - expectedCost(88, 6));
  });
});
