import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * Issue 32: chat completions serve `custom` tools as the Responses API does. A custom tool goes to
 * the chat upstream as a function with one string parameter `input` (a grammar is written into its
 * description); the upstream's call of it comes back as `{type: "custom", custom: {name, input}}`,
 * streamed as openai-node 7's ChatCompletionChunk types have it; such a call and its tool message,
 * sent back, reach the upstream as the function call and result they stand for.
 */

type Json = Record<string, unknown>;
type Chunk = OpenAI.Chat.Completions.ChatCompletionChunk;

const PATCH = '*** Begin Patch\n*** Add File: a.txt\n+hello "world"\n*** End Patch';
const GRAMMAR = 'start: "*** Begin Patch" /(.|\\n)*/';

const applyPatch: OpenAI.Chat.Completions.ChatCompletionCustomTool = {
  type: 'custom',
  custom: {
    name: 'apply_patch',
    description: 'Apply a patch to files',
    format: { type: 'grammar', grammar: { syntax: 'lark', definition: GRAMMAR } },
  },
};
const shell: OpenAI.Chat.Completions.ChatCompletionCustomTool = {
  type: 'custom',
  custom: { name: 'shell', format: { type: 'text' } },
};
const weather: OpenAI.Chat.Completions.ChatCompletionFunctionTool = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

const CUSTOM_PARAMETERS = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input of the tool, as free-form text.' } },
  required: ['input'],
  additionalProperties: false,
};

/** What the upstream is offered for [applyPatch, shell, weather]. */
const OFFERED = [
  {
    type: 'function',
    function: {
      name: 'apply_patch',
      description: `Apply a patch to files\n\nThe input must match this lark grammar:\n${GRAMMAR}`,
      parameters: CUSTOM_PARAMETERS,
    },
  },
  { type: 'function', function: { name: 'shell', parameters: CUSTOM_PARAMETERS } },
  { type: 'function', function: { name: 'get_weather', parameters: weather.function.parameters } },
];

/** A chunk's tool call deltas as plain JSON (openai-node 6's types know only function deltas). */
const callDeltas = (chunk: Chunk): Json[] => (chunk.choices[0]?.delta.tool_calls ?? []) as unknown as Json[];

describe('OpenAI API: custom tools on chat completions (issue 32)', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  async function post(key: string, body: Json): Promise<Response> {
    return fetch(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /** Exactly one charge for the request, of exactly this cost. */
  async function chargedOnce(accountId: string, requestId: string | null, cost: bigint): Promise<void> {
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, 1);
    assert.equal(charges[0]?.requestId, requestId);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
  }

  it('offers custom tools as functions of one string and answers their calls as custom tool calls, charged once', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [
        { id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
        { id: 'call_weather', name: 'get_weather', arguments: '{"city":"Isfahan"}' },
        // Not the JSON object asked for: the raw arguments are the input.
        { id: 'call_shell', name: 'shell', arguments: 'ls -la' },
      ],
      usage: { prompt_tokens: 90, completion_tokens: 40 },
    });
    const raw = await fx
      .client(key)
      .chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'Create a.txt, check the weather, list files' }],
        tools: [applyPatch, shell, weather],
      })
      .withResponse();
    const completion = raw.data;
    assertSchema('CreateChatCompletionResponse', completion);
    const sent = fx.upstream.requests[0]?.body;
    assert.deepEqual(sent?.['tools'], OFFERED);
    assert.equal(sent?.['tool_choice'], undefined);
    assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
    assert.deepEqual(completion.choices[0]?.message.tool_calls, [
      { id: 'call_patch', type: 'custom', custom: { name: 'apply_patch', input: PATCH } },
      { id: 'call_weather', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Isfahan"}' } },
      { id: 'call_shell', type: 'custom', custom: { name: 'shell', input: 'ls -la' } },
    ]);
    const cost = expectedCost(90, 40);
    assert.equal((completion.usage as unknown as { cost: number }).cost, Number(cost));
    await chargedOnce(accountId, raw.response.headers.get('x-request-id'), cost);
  });

  it('streams a custom call as openai-node 7 types it: id, type and name first, then the whole input', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      text: 'Writing it.',
      calls: [
        { id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
        { id: 'call_weather', name: 'get_weather', arguments: '{"city":"Isfahan"}' },
      ],
      usage: { prompt_tokens: 80, completion_tokens: 30 },
    });
    const { data: stream, response } = await fx
      .client(key)
      .chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'Create a.txt and check the weather' }],
        tools: [applyPatch, shell, weather],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    const chunks: Chunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.deepEqual(fx.upstream.requests[0]?.body['tools'], OFFERED);

    // Every chunk is OpenAI's, but for custom call deltas, which the OpenAPI document has not
    // caught up with (openai-node 7 has): those are checked against openai-node 7's shape below.
    for (const chunk of chunks)
      if (!callDeltas(chunk).some((d) => d['type'] === 'custom' || d['custom'] !== undefined))
        assertSchema('CreateChatCompletionStreamResponse', chunk);
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'Writing it.');

    const deltas = chunks.flatMap(callDeltas);
    const patch = deltas.filter((d) => d['index'] === 0);
    for (const d of patch) assert.equal(d['function'], undefined);
    assert.deepEqual(patch, [
      { index: 0, id: 'call_patch', type: 'custom', custom: { name: 'apply_patch', input: '' } },
      { index: 0, custom: { input: PATCH } },
    ]);
    const fn = deltas.filter((d) => d['index'] === 1);
    assert.deepEqual(fn[0], {
      index: 1,
      id: 'call_weather',
      type: 'function',
      function: { name: 'get_weather', arguments: '' },
    });
    assert.equal(fn.map((d) => (d['function'] as Json)['arguments']).join(''), '{"city":"Isfahan"}');

    // The input comes before the finish, which comes once, then the usage.
    const inputAt = chunks.findIndex((c) =>
      callDeltas(c).some((d) => (d['custom'] as Json | undefined)?.['input'] === PATCH),
    );
    const finishAt = chunks.findIndex((c) => c.choices[0]?.finish_reason === 'tool_calls');
    assert.ok(inputAt >= 0 && inputAt < finishAt, `input at ${inputAt}, finish at ${finishAt}`);
    assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason !== null && c.choices.length > 0).length, 1);
    const last = chunks[chunks.length - 1];
    assert.deepEqual(last?.choices, []);
    const cost = expectedCost(80, 30);
    assert.equal((last?.usage as unknown as { cost: number } | undefined)?.cost, Number(cost));
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
    await chargedOnce(accountId, response.headers.get('x-request-id'), cost);
  });

  it('streams custom calls of every choice (n: 2) without include_usage, each input before its finish', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [{ id: 'call_sh', name: 'shell', arguments: JSON.stringify({ input: 'echo "a\\b"' }) }],
      usage: { prompt_tokens: 30, completion_tokens: 12 },
    });
    const { data: stream, response } = await fx
      .client(key)
      .chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'echo' }],
        tools: [shell],
        n: 2,
        stream: true,
      })
      .withResponse();
    const chunks: Chunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const index of [0, 1]) {
      const events = chunks.flatMap((c) =>
        c.choices
          .filter((choice) => choice.index === index)
          .flatMap((choice) => [
            ...((choice.delta.tool_calls ?? []) as unknown as Json[]),
            ...(choice.finish_reason !== null ? [{ finish: choice.finish_reason }] : []),
          ]),
      );
      assert.deepEqual(events, [
        { index: 0, id: 'call_sh', type: 'custom', custom: { name: 'shell', input: '' } },
        { index: 0, custom: { input: 'echo "a\\b"' } },
        { finish: 'tool_calls' },
      ]);
    }
    assert.ok(chunks.every((c) => c.usage === undefined || c.usage === null));
    await chargedOnce(accountId, response.headers.get('x-request-id'), expectedCost(30, 12));
  });

  it('forces a custom tool with tool_choice {type: "custom"}, and refuses one that names no custom tool', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [{ id: 'call_1', name: 'shell', arguments: '{"input":"pwd"}' }],
    });
    const completion = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'where am I' }],
      tools: [applyPatch, shell, weather],
      tool_choice: { type: 'custom', custom: { name: 'shell' } },
    });
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], { type: 'function', function: { name: 'shell' } });
    assert.deepEqual(completion.choices[0]?.message.tool_calls, [
      { id: 'call_1', type: 'custom', custom: { name: 'shell', input: 'pwd' } },
    ]);

    fx.upstream.reset();
    const before = await fx.balance(accountId);
    for (const toolChoice of [
      { type: 'custom', custom: { name: 'get_weather' } },
      { type: 'custom', custom: { name: 'nope' } },
      { type: 'function', function: { name: 'shell' } },
    ] as OpenAI.Chat.Completions.ChatCompletionToolChoiceOption[]) {
      await assert.rejects(
        fx.client(key).chat.completions.create({
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'x' }],
          tools: [applyPatch, shell, weather],
          tool_choice: toolChoice,
        }),
        (error: unknown) =>
          error instanceof OpenAI.BadRequestError &&
          error.param === 'tool_choice' &&
          /is not among the tools/.test(error.message),
      );
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), before);
  });

  it('allowed_tools may name custom tools: a chat upstream gets them as allowed functions, every tool offered', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [{ id: 'call_1', name: 'apply_patch', arguments: '{"input":"x"}' }],
    });
    const completion = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'patch' }],
      tools: [applyPatch, shell, weather],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: {
          mode: 'required',
          tools: [
            { type: 'custom', custom: { name: 'apply_patch' } },
            { type: 'function', function: { name: 'get_weather' } },
          ],
        },
      },
    });
    // Every tool stays offered and the chat upstream gets allowed_tools (SPEC §13), the custom
    // tool named as the function it is offered as.
    const sent = fx.upstream.requests[0]?.body;
    assert.deepEqual(
      (sent?.['tools'] as { function: { name: string } }[]).map((t) => t.function.name),
      ['apply_patch', 'shell', 'get_weather'],
    );
    assert.deepEqual(sent?.['tool_choice'], {
      type: 'allowed_tools',
      allowed_tools: {
        mode: 'required',
        tools: [
          { type: 'function', function: { name: 'apply_patch' } },
          { type: 'function', function: { name: 'get_weather' } },
        ],
      },
    });
    assert.deepEqual(completion.choices[0]?.message.tool_calls, [
      { id: 'call_1', type: 'custom', custom: { name: 'apply_patch', input: 'x' } },
    ]);

    // Naming a function as a custom tool (or one that does not exist) is a 400 naming the entry.
    for (const [entry, param] of [
      [{ type: 'custom', custom: { name: 'get_weather' } }, 'tool_choice.allowed_tools.tools[1]'],
      [{ type: 'function', function: { name: 'shell' } }, 'tool_choice.allowed_tools.tools[1]'],
      [{ type: 'custom', custom: {} }, 'tool_choice.allowed_tools.tools[1].custom.name'],
      [{ type: 'code_interpreter' }, 'tool_choice.allowed_tools.tools[1].type'],
    ] as [Json, string][]) {
      const response = await post(key, {
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'x' }],
        tools: [applyPatch, shell, weather],
        tool_choice: {
          type: 'allowed_tools',
          allowed_tools: { mode: 'auto', tools: [{ type: 'custom', custom: { name: 'apply_patch' } }, entry] },
        },
      });
      assert.equal(response.status, 400, JSON.stringify(entry));
      const { error } = (await response.json()) as { error: Json };
      assert.equal(error['param'], param, JSON.stringify(error));
    }
  });

  it('takes an assistant custom tool call and its tool message back: upstream sees the function call and result', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) }],
        usage: { prompt_tokens: 50, completion_tokens: 20 },
      },
      { kind: 'text', text: 'Created a.txt.', usage: { prompt_tokens: 120, completion_tokens: 5 } },
    );
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Create a.txt' }];
    const first = await client.chat.completions.create({ model: 'svc-pro', messages, tools: [applyPatch] });
    const answer = first.choices[0]?.message;
    assert.ok(answer !== undefined);
    // The SDK's answer goes back as it came, with the tool's result.
    messages.push(answer, { role: 'tool', tool_call_id: 'call_patch', content: 'Done: A a.txt' });
    const second = await client.chat.completions.create({ model: 'svc-pro', messages, tools: [applyPatch] });
    assert.equal(second.choices[0]?.message.content, 'Created a.txt.');

    assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
      { role: 'user', content: 'Create a.txt' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_patch',
            type: 'function',
            function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_patch', content: 'Done: A a.txt' },
    ]);
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.equal(charges.length, 2, 'one charge per call');
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(50, 20) - expectedCost(120, 5));
  });

  it("refuses bad custom tools, calls and choices with OpenAI's 400 naming the field, before anything is held", async () => {
    const { key, accountId } = await fx.fund(10_000);
    const user = [{ role: 'user', content: 'x' }];
    const cases: [string, Json, string, string][] = [
      ['missing name', { tools: [{ type: 'custom', custom: {} }] }, 'tools[0].custom.name', 'invalid_value'],
      ['no custom object', { tools: [{ type: 'custom' }] }, 'tools[0].custom', 'invalid_value'],
      [
        'custom not an object',
        { tools: [{ type: 'custom', custom: 'apply_patch' }] },
        'tools[0].custom',
        'invalid_type',
      ],
      // The Responses shape of a custom tool is not the chat one.
      ['Responses shape', { tools: [{ type: 'custom', name: 'apply_patch' }] }, 'tools[0].custom', 'invalid_value'],
      [
        'name not a string',
        { tools: [{ type: 'custom', custom: { name: 7 } }] },
        'tools[0].custom.name',
        'invalid_type',
      ],
      [
        'unknown field',
        { tools: [{ type: 'custom', custom: { name: 'p', parameters: { type: 'object' } } }] },
        'tools[0].custom.parameters',
        'unknown_parameter',
      ],
      [
        'bad name',
        { tools: [{ type: 'custom', custom: { name: 'has space' } }] },
        'tools[0].custom.name',
        'invalid_value',
      ],
      [
        'name used twice',
        { tools: [weather, { type: 'custom', custom: { name: 'get_weather' } }] },
        'tools[1].custom.name',
        'invalid_value',
      ],
      [
        'format not an object',
        { tools: [{ type: 'custom', custom: { name: 'p', format: 'text' } }] },
        'tools[0].custom.format',
        'invalid_type',
      ],
      [
        'format type unknown',
        { tools: [{ type: 'custom', custom: { name: 'p', format: { type: 'json' } } }] },
        'tools[0].custom.format.type',
        'invalid_value',
      ],
      [
        'grammar missing',
        { tools: [{ type: 'custom', custom: { name: 'p', format: { type: 'grammar' } } }] },
        'tools[0].custom.format.grammar',
        'invalid_value',
      ],
      [
        'grammar in the Responses shape',
        {
          tools: [
            { type: 'custom', custom: { name: 'p', format: { type: 'grammar', syntax: 'lark', definition: GRAMMAR } } },
          ],
        },
        'tools[0].custom.format.syntax',
        'unknown_parameter',
      ],
      [
        'grammar syntax unknown',
        {
          tools: [
            {
              type: 'custom',
              custom: { name: 'p', format: { type: 'grammar', grammar: { syntax: 'ebnf', definition: 'x' } } },
            },
          ],
        },
        'tools[0].custom.format.grammar.syntax',
        'invalid_value',
      ],
      [
        'grammar without definition',
        {
          tools: [{ type: 'custom', custom: { name: 'p', format: { type: 'grammar', grammar: { syntax: 'regex' } } } }],
        },
        'tools[0].custom.format.grammar.definition',
        'invalid_value',
      ],
      ['unknown tool type', { tools: [weather, { type: 'retrieval' }] }, 'tools[1].type', 'invalid_value'],
      [
        'tool_choice custom without name',
        { tools: [applyPatch], tool_choice: { type: 'custom', custom: {} } },
        'tool_choice.custom.name',
        'invalid_type',
      ],
      [
        'history custom call without name',
        {
          messages: [
            ...user,
            { role: 'assistant', tool_calls: [{ id: 'c1', type: 'custom', custom: { input: 'x' } }] },
            { role: 'tool', tool_call_id: 'c1', content: 'ok' },
          ],
        },
        'messages[1].tool_calls[0].custom.name',
        'invalid_value',
      ],
      [
        'history custom call without input',
        {
          messages: [...user, { role: 'assistant', tool_calls: [{ id: 'c1', type: 'custom', custom: { name: 'p' } }] }],
        },
        'messages[1].tool_calls[0].custom.input',
        'invalid_value',
      ],
      [
        'history custom call with a function',
        {
          messages: [
            ...user,
            { role: 'assistant', tool_calls: [{ id: 'c1', type: 'custom', function: { name: 'p', arguments: '{}' } }] },
          ],
        },
        'messages[1].tool_calls[0].custom',
        'invalid_type',
      ],
      [
        'history call of an unknown type',
        {
          messages: [
            ...user,
            { role: 'assistant', tool_calls: [{ id: 'c1', type: 'mcp', function: { name: 'p', arguments: '{}' } }] },
          ],
        },
        'messages[1].tool_calls[0].type',
        'invalid_value',
      ],
    ];
    for (const [what, extra, param, code] of cases) {
      const response = await post(key, { model: 'svc-pro', messages: user, ...extra });
      assert.equal(response.status, 400, what);
      const { error } = (await response.json()) as { error: Json };
      assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], what);
      assert.equal(error['type'], 'invalid_request_error', what);
      assert.equal(error['param'], param, `${what}: ${JSON.stringify(error)}`);
      assert.equal(error['code'], code, `${what}: ${JSON.stringify(error)}`);
    }
    // Through the real client too: the SDK's BadRequestError names the field.
    await assert.rejects(
      fx.client(key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'custom', custom: {} } as unknown as OpenAI.Chat.Completions.ChatCompletionCustomTool],
      }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === 'tools[0].custom.name',
    );
    assert.equal(fx.upstream.requests.length, 0);
    const wallet = await fx.svc.wallet(accountId);
    assert.equal(wallet.balance, 10_000n);
    assert.equal(wallet.held, 0n);
  });
});
