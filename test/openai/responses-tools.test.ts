import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import type OpenAI from 'openai';
import pino from 'pino';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { configB } from '../mcp/helpers';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

type Json = Record<string, unknown>;

// What Codex sends for an MCP server (`[mcp_servers.svc]`): its tools inside a namespace.
const svcNamespace = {
  type: 'namespace',
  name: 'mcp__svc',
  description: 'Tools of the svc MCP server',
  tools: [
    {
      type: 'function',
      name: 'maps_search_places',
      description: 'Search places on the map',
      parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
      strict: false,
    },
    {
      type: 'function',
      name: 'web_search',
      description: 'Search the web',
      parameters: { type: 'object', properties: { query: { type: 'string' } } },
      strict: false,
    },
  ],
} as unknown as OpenAI.Responses.Tool;

const applyPatch = {
  type: 'custom',
  name: 'apply_patch',
  description: 'Apply a patch to files',
  format: { type: 'grammar', syntax: 'lark', definition: 'start: "*** Begin Patch" /(.|\\n)*/' },
} as unknown as OpenAI.Responses.Tool;

const CUSTOM_PARAMETERS = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input of the tool, as free-form text.' } },
  required: ['input'],
  additionalProperties: false,
};

const PATCH = '*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch';

/** The events of a raw SSE body. */
async function sseEvents(res: Response): Promise<Json[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((frame) => frame.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => JSON.parse(line.slice('data: '.length)) as Json);
}

describe('OpenAI API: Responses with Codex-shaped tools (namespace, custom) and reasoning', function () {
  let fx: OpenAiFixture;
  const logLines: Json[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.trim() !== '') logLines.push(JSON.parse(line) as Json);
        done();
      },
    });
    fx = await startOpenAiFixture({ logger: pino({ level: 'warn' }, sink) });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => {
    fx.upstream.reset();
    logLines.length = 0;
  });

  const post = (key: string, body: Json): Promise<Response> =>
    fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('offers namespace and custom tools upstream as functions and maps their calls back, then their outputs', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [
          { id: 'call_ns', name: 'mcp__svc__maps_search_places', arguments: '{"query":"cafe in Isfahan"}' },
          { id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
        ],
        usage: { prompt_tokens: 70, completion_tokens: 30 },
      },
      { kind: 'text', text: 'Found a cafe and wrote a.txt.', usage: { prompt_tokens: 120, completion_tokens: 9 } },
    );
    const first = await client.responses.create({
      model: 'svc-pro',
      input: 'Find a cafe in Isfahan and create a.txt',
      tools: [svcNamespace, applyPatch],
    });
    assertSchema('Response', first);
    const sentTools = fx.upstream.requests[0]?.body['tools'] as Json[];
    assert.deepEqual(sentTools, [
      {
        type: 'function',
        function: {
          name: 'mcp__svc__maps_search_places',
          description: 'Search places on the map',
          parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
          strict: false,
        },
      },
      {
        type: 'function',
        function: {
          name: 'mcp__svc__web_search',
          description: 'Search the web',
          parameters: { type: 'object', properties: { query: { type: 'string' } } },
          strict: false,
        },
      },
      {
        type: 'function',
        function: {
          name: 'apply_patch',
          description: `Apply a patch to files\n\nThe input must match this lark grammar:\nstart: "*** Begin Patch" /(.|\\n)*/`,
          parameters: CUSTOM_PARAMETERS,
        },
      },
    ]);
    assert.deepEqual(
      first.tools.map((t) => t.type),
      ['namespace', 'custom'],
    );
    const [call, custom] = first.output as unknown as Json[];
    assert.deepEqual(
      { ...call, id: undefined },
      {
        id: undefined,
        type: 'function_call',
        status: 'completed',
        call_id: 'call_ns',
        namespace: 'mcp__svc',
        name: 'maps_search_places',
        arguments: '{"query":"cafe in Isfahan"}',
      },
    );
    assertSchema('FunctionToolCall', call);
    assert.deepEqual(
      { ...custom, id: undefined },
      {
        id: undefined,
        type: 'custom_tool_call',
        status: 'completed',
        call_id: 'call_patch',
        name: 'apply_patch',
        input: PATCH,
      },
    );
    assertSchema('CustomToolCall', custom);

    const second = await client.responses.create({
      model: 'svc-pro',
      previous_response_id: first.id,
      input: [
        { type: 'function_call_output', call_id: 'call_ns', output: '{"places":["Cafe Naghsh"]}' },
        { type: 'custom_tool_call_output', call_id: 'call_patch', output: 'Done: A a.txt' },
      ],
      tools: [svcNamespace, applyPatch],
    });
    assertSchema('Response', second);
    assert.equal(second.output_text, 'Found a cafe and wrote a.txt.');
    assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
      { role: 'user', content: 'Find a cafe in Isfahan and create a.txt' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_ns',
            type: 'function',
            function: { name: 'mcp__svc__maps_search_places', arguments: '{"query":"cafe in Isfahan"}' },
          },
          {
            id: 'call_patch',
            type: 'function',
            function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_ns', content: '{"places":["Cafe Naghsh"]}' },
      { role: 'tool', tool_call_id: 'call_patch', content: 'Done: A a.txt' },
    ]);
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(70, 30) - expectedCost(120, 9));
  });

  it('takes back the call items a stateless client (Codex, store: false) replays itself', async () => {
    const { key } = await fx.fund(100_000);
    await fx.client(key).responses.create({
      model: 'svc-pro',
      store: false,
      input: [
        { type: 'message', role: 'user', content: 'go' },
        {
          type: 'function_call',
          call_id: 'c1',
          namespace: 'mcp__svc',
          name: 'maps_search_places',
          arguments: '{"query":"x"}',
        } as unknown as OpenAI.Responses.ResponseInputItem,
        { type: 'function_call_output', call_id: 'c1', output: 'none' },
        { type: 'custom_tool_call', call_id: 'c2', name: 'apply_patch', input: PATCH },
        { type: 'custom_tool_call_output', call_id: 'c2', output: 'ok' },
      ],
      tools: [svcNamespace, applyPatch],
    });
    const messages = fx.upstream.requests[0]?.body['messages'] as Json[];
    assert.deepEqual(messages.slice(1), [
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'mcp__svc__maps_search_places', arguments: '{"query":"x"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'none' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'c2',
            type: 'function',
            function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c2', content: 'ok' },
    ]);
  });

  it('streams namespaced and custom calls with their own events, each valid against the OpenAPI schemas', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      reasoning: 'The user wants a cafe. I will search.',
      calls: [
        { id: 'call_ns', name: 'mcp__svc__maps_search_places', arguments: '{"query":"cafe"}' },
        { id: 'call_patch', name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) },
      ],
      usage: { prompt_tokens: 60, completion_tokens: 40, reasoning_tokens: 12 },
    });
    const res = await post(key, {
      model: 'svc-pro',
      input: 'Find a cafe',
      tools: [svcNamespace, applyPatch],
      stream: true,
    });
    assert.equal(res.status, 200);
    const events = await sseEvents(res);
    for (const event of events) assertEvent(event);
    const types = events.map((e) => e['type']);
    assert.deepEqual(types.slice(0, 5), [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
    ]);
    assert.ok(types.includes('response.reasoning_summary_text.done'));
    assert.ok(types.includes('response.reasoning_summary_part.done'));
    assert.ok(types.includes('response.function_call_arguments.delta'));
    assert.ok(types.includes('response.custom_tool_call_input.done'));
    const inputDone = events.find((e) => e['type'] === 'response.custom_tool_call_input.done');
    assert.equal(inputDone?.['input'], PATCH);
    const argsDone = events.find((e) => e['type'] === 'response.function_call_arguments.done');
    assert.equal(argsDone?.['name'], 'maps_search_places');
    const done = events.filter((e) => e['type'] === 'response.output_item.done').map((e) => e['item'] as Json);
    assert.deepEqual(
      done.map((item) => [item['type'], item['namespace'] ?? null, item['name'] ?? null]),
      [
        ['reasoning', null, null],
        ['function_call', 'mcp__svc', 'maps_search_places'],
        ['custom_tool_call', null, 'apply_patch'],
      ],
    );
    assert.deepEqual(done[0]?.['summary'], [{ type: 'summary_text', text: 'The user wants a cafe. I will search.' }]);
    const completed = events[events.length - 1];
    assert.equal(completed?.['type'], 'response.completed');
    const response = completed?.['response'] as Json;
    assertSchema('Response', response);
    assert.deepEqual(
      (response['output'] as Json[]).map((item) => item['id']),
      done.map((item) => item['id']),
    );
    const usage = response['usage'] as Json;
    assert.deepEqual(usage['output_tokens_details'], { reasoning_tokens: 12 });
    // Reasoning tokens are part of the output tokens the upstream reports, billed at the output price.
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(60, 40));

    // The stored response continues with the custom call's output.
    fx.upstream.enqueue({ kind: 'text', text: 'ok' });
    const follow = await fx.client(key).responses.create({
      model: 'svc-pro',
      previous_response_id: String(response['id']),
      input: [{ type: 'custom_tool_call_output', call_id: 'call_patch', output: 'applied' }],
      tools: [svcNamespace, applyPatch],
    });
    assert.equal(follow.output_text, 'ok');
  });

  it('turns reasoning text (reasoning_content or reasoning) into a reasoning item with a summary', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue(
      { kind: 'text', text: '4', reasoning: '2 plus 2 is 4.' },
      { kind: 'text', text: '6', reasoning: '3 plus 3 is 6.', reasoningField: 'reasoning' },
    );
    const client = fx.client(key);
    for (const [question, thought, answer] of [
      ['2+2?', '2 plus 2 is 4.', '4'],
      ['3+3?', '3 plus 3 is 6.', '6'],
    ] as const) {
      const response = await client.responses.create({ model: 'svc-pro', input: question });
      assertSchema('Response', response);
      assert.equal(response.output_text, answer);
      const [reasoning, message] = response.output as unknown as Json[];
      assert.equal(reasoning?.['type'], 'reasoning');
      assertSchema('ReasoningItem', reasoning);
      assert.deepEqual(reasoning?.['summary'], [{ type: 'summary_text', text: thought }]);
      assert.equal(message?.['type'], 'message');
    }
  });

  it("takes tool_choice naming a namespace's tool or a custom tool", async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const forced = await client.responses.create({
      model: 'svc-pro',
      input: 'go',
      tools: [svcNamespace, applyPatch],
      tool_choice: { type: 'function', namespace: 'mcp__svc', name: 'maps_search_places' } as never,
    });
    assertSchema('Response', forced);
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], {
      type: 'function',
      function: { name: 'mcp__svc__maps_search_places' },
    });
    await client.responses.create({
      model: 'svc-pro',
      input: 'go',
      tools: [svcNamespace, applyPatch],
      tool_choice: { type: 'custom', name: 'apply_patch' },
    });
    assert.deepEqual(fx.upstream.requests[1]?.body['tool_choice'], {
      type: 'function',
      function: { name: 'apply_patch' },
    });
  });

  it('refuses bad namespace and custom input with a 400 naming the field, charging nothing', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const fn = (name: string): Json => ({ type: 'function', name, parameters: { type: 'object', properties: {} } });
    const cases: { body: Json; param: string; message: RegExp }[] = [
      {
        body: { tools: [{ type: 'namespace', name: 'mcp__empty', description: '', tools: [] }] },
        param: 'tools[0].tools',
        message: /at least one tool/,
      },
      {
        body: {
          tools: [
            { type: 'namespace', name: 'mcp__a', description: '', tools: [fn('x__y')] },
            { type: 'namespace', name: 'mcp__a__x', description: '', tools: [fn('y')] },
          ],
        },
        param: 'tools[1].tools[0].name',
        message: /'mcp__a__x__y' is already used by a tool in namespace 'mcp__a'/,
      },
      {
        body: { tools: [{ type: 'namespace', name: 'mcp__svc', description: '', tools: [fn('a'), fn('a')] }] },
        param: 'tools[0].tools[1].name',
        message: /already used/,
      },
      {
        body: {
          tools: [{ type: 'namespace', name: `mcp__${'n'.repeat(40)}`, description: '', tools: [fn('t'.repeat(30))] }],
        },
        param: 'tools[0].tools[0].name',
        message: /1-64 characters/,
      },
      {
        body: {
          input: [
            { role: 'user', content: 'hi' },
            { type: 'custom_tool_call_output', call_id: 'call_nowhere', output: 'x' },
          ],
          tools: [applyPatch],
        },
        param: 'input[1].call_id',
        message: /no custom_tool_call with call_id 'call_nowhere'/,
      },
      {
        body: { tools: [svcNamespace], tool_choice: { type: 'function', namespace: 'mcp__svc', name: 'nope' } },
        param: 'tool_choice',
        message: /'mcp__svc\.nope' is not among the tools/,
      },
    ];
    for (const { body, param, message } of cases) {
      const res = await post(key, { model: 'svc-pro', input: 'hi', ...body });
      assert.equal(res.status, 400, JSON.stringify(body));
      const error = ((await res.json()) as { error: Json }).error;
      assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(error['type'], 'invalid_request_error');
      assert.equal(error['param'], param);
      assert.match(String(error['message']), message);
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 100_000n);
  });

  it('never leaves hosted tools out silently: they are refused, and the log has no dropped tools', async () => {
    const { key } = await fx.fund(100_000);
    await assert.rejects(
      fx.client(key).responses.create({
        model: 'svc-pro',
        input: 'hello',
        tools: [svcNamespace, { type: 'local_shell' }, { type: 'file_search', vector_store_ids: ['vs_1'] }],
      }),
      (error: unknown) => (error as { status?: number }).status === 400,
    );
    assert.equal(
      logLines.find((line) => Array.isArray(line['droppedTools'])),
      undefined,
    );
  });
});

describe('OpenAI API: Responses with the hosted web_search tool', function () {
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;
  const RELEASES = 'https://fastapi.tiangolo.com/release-notes/';

  before(async () => {
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({ extraConfig: () => configB(fakes) });
  });
  after(async () => {
    await fx.close();
    await fakes.close();
  });
  beforeEach(() => {
    fx.upstream.reset();
    fakes.set('searxng', 'ok');
  });

  const searchThenAnswer = (): void =>
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_s', name: 'web_search', arguments: '{"query":"fastapi release notes"}' }],
        usage: { prompt_tokens: 80, completion_tokens: 15 },
      },
      {
        kind: 'text',
        text: `The latest notes are at ${RELEASES} (FastAPI).`,
        usage: { prompt_tokens: 300, completion_tokens: 20 },
      },
    );

  it('runs the search in svc, returns a web_search_call item and url_citation annotations, charged at the tariff plus tokens', async () => {
    const { key, accountId } = await fx.fund(100_000);
    searchThenAnswer();
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'Where are the FastAPI release notes?',
      tools: [{ type: 'web_search' }],
    });
    assertSchema('Response', response);
    const [search, message] = response.output as unknown as Json[];
    assertSchema('WebSearchToolCall', search);
    assert.equal(search?.['status'], 'completed');
    assert.deepEqual((search?.['action'] as Json)['query'], 'fastapi release notes');
    assert.ok(((search?.['action'] as Json)['sources'] as Json[]).some((s) => s['url'] === RELEASES));
    const text = (message?.['content'] as Json[])[0] as Json;
    const at = String(text['text']).indexOf(RELEASES);
    assert.deepEqual(text['annotations'], [
      {
        type: 'url_citation',
        start_index: at,
        end_index: at + RELEASES.length,
        url: RELEASES,
        title: 'Release Notes - FastAPI',
      },
    ]);
    assert.equal(fakes.requestsTo('searxng').length, 1);
    // The upstream saw the hosted tool as a function, then the search's results as its answer.
    const first = fx.upstream.requests[0]?.body;
    assert.deepEqual(
      (first?.['tools'] as { function: { name: string } }[]).map((t) => t.function.name),
      ['web_search'],
    );
    const messages = fx.upstream.requests[1]?.body['messages'] as Json[];
    assert.equal(messages[messages.length - 1]?.['role'], 'tool');
    assert.match(String(messages[messages.length - 1]?.['content']), /fastapi\.tiangolo\.com/);
    const cost = 150n + expectedCost(80, 15) + expectedCost(300, 20);
    assert.deepEqual([response.usage?.input_tokens, response.usage?.output_tokens], [380, 35]);
    assert.equal((response.usage as unknown as Json)['cost'], Number(cost));
    assert.equal(await fx.balance(accountId), 100_000n - cost);
    // The loop (two turns and a search) is held once and settled once: one charge, its sum.
    const ledger = await fx.svc.ledger(accountId);
    assert.deepEqual(
      ledger.filter((e) => e.kind === 'charge').map((e) => e.amount),
      [-cost],
    );
  });

  it('tool_choice naming web_search forces the first search only: later turns choose freely (one search, one charge)', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const searchesBefore = fakes.requestsTo('searxng').length;
    searchThenAnswer();
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'Where are the FastAPI release notes?',
      tools: [{ type: 'web_search' }],
      tool_choice: { type: 'web_search' },
    } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    assert.equal(response.status, 'completed');
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], {
      type: 'function',
      function: { name: 'web_search' },
    });
    assert.equal(fx.upstream.requests[1]?.body['tool_choice'], 'auto');
    assert.equal(fakes.requestsTo('searxng').length - searchesBefore, 1);
    assert.equal(await fx.balance(accountId), 100_000n - (150n + expectedCost(80, 15) + expectedCost(300, 20)));
  });

  it('streams the url_citation annotations of what the search found', async () => {
    const { key } = await fx.fund(100_000);
    searchThenAnswer();
    const stream = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'notes?',
      tools: [{ type: 'web_search' }],
      stream: true,
    });
    const events: Json[] = [];
    for await (const event of stream) events.push(event as unknown as Json);
    for (const event of events) assertEvent(event);
    const added = events.find((e) => e['type'] === 'response.output_text.annotation.added');
    assert.equal((added?.['annotation'] as Json | undefined)?.['url'], RELEASES);
    const completed = events[events.length - 1]?.['response'] as Json;
    const message = (completed['output'] as Json[]).find((item) => item['type'] === 'message');
    const part = (message?.['content'] as Json[])[0];
    assert.deepEqual(part?.['annotations'], [added?.['annotation']]);
  });

  it('streams the search with response.web_search_call.* events, and a search that finds nothing is free', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fakes.set('searxng', 'empty');
    searchThenAnswer();
    const res = await fetch(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', input: 'notes?', tools: [{ type: 'web_search' }], stream: true }),
    });
    assert.equal(res.status, 200);
    const events = await sseEvents(res);
    for (const event of events) assertEvent(event);
    const types = events.map((e) => e['type']);
    const from = types.indexOf('response.web_search_call.in_progress');
    assert.deepEqual(types.slice(from - 1, from + 4), [
      'response.output_item.added',
      'response.web_search_call.in_progress',
      'response.web_search_call.searching',
      'response.web_search_call.completed',
      'response.output_item.done',
    ]);
    assert.ok(!types.includes('response.function_call_arguments.delta'), "the hosted call is not the client's");
    const completed = events[events.length - 1]?.['response'] as Json;
    assertSchema('Response', completed);
    assert.deepEqual(
      (completed['output'] as Json[]).map((item) => item['type']),
      ['web_search_call', 'message'],
    );
    const cost = expectedCost(80, 15) + expectedCost(300, 20);
    assert.equal((completed['usage'] as Json)['cost'], Number(cost));
    assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
  });
});
