import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * SPEC §7d, "nothing dropped": every field, item, part and tool of a request is carried,
 * translated, served, or refused with OpenAI's own 400 naming it, before anything is held.
 * Each case here was accepted and silently dropped (or changed) before.
 */

type Obj = Record<string, unknown>;

async function post(fx: OpenAiFixture, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${fx.baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function errorOf(response: Response): Promise<{ status: number; error: Obj }> {
  const json = (await response.json()) as { error: Obj };
  assert.deepEqual(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
  return { status: response.status, error: json.error };
}

describe('OpenAI API: nothing dropped (SPEC §7d)', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({
      extraConfig: (base) => `
  svc-openai:
    provider: openai
    base_url: ${base}
    upstream_model: fake-model-1
    developer_role: true
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    max_output_tokens: 1000
`,
    });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  /** Sends each body to /responses; each must be a 400 with `code` and `param`, nothing sent or held. */
  async function refused(cases: [Obj, string, string][]): Promise<void> {
    const { key, accountId } = await fx.fund(10_000);
    for (const [extra, code, param] of cases) {
      const { status, error } = await errorOf(await post(fx, '/responses', key, { model: 'svc-pro', ...extra }));
      assert.equal(status, 400, JSON.stringify(extra));
      assert.equal(error['type'], 'invalid_request_error');
      assert.equal(error['code'], code, JSON.stringify(error));
      assert.equal(error['param'], param, JSON.stringify(error));
    }
    assert.equal(fx.upstream.requests.length, 0);
    const wallet = await fx.svc.wallet(accountId);
    assert.equal(wallet.balance, 10_000n);
    assert.equal(wallet.held, 0n);
  }

  it('refuses unknown parameters as OpenAI does, and takes what Codex and openai-node 7 send', async () => {
    await refused([[{ input: 'hi', frobnicate: 1 }, 'unknown_parameter', 'frobnicate']]);
    const { key } = await fx.fund(100_000);
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'hi',
      truncation: 'auto',
      max_tool_calls: 3,
      prompt_cache_key: 'thread-1',
      service_tier: 'auto',
      stream_options: { include_obfuscation: false },
      // Codex's fields (not in openai-node 6's types).
      ...({ client_metadata: { 'x-codex-window-id': 'w1' }, prompt_cache_options: { mode: 'x' } } as Obj),
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    assert.equal(response.status, 'completed');
    assert.deepEqual(fx.upstream.requests[0]?.body['prompt_cache_options'], { mode: 'x' });
    assert.equal(fx.upstream.requests[0]?.body['client_metadata'], undefined);
  });

  it('never answers a compaction request as an ordinary, charged turn: a misplaced trigger or a foreign item is refused before any hold', async () => {
    await refused([
      [{ input: [{ type: 'compaction_trigger' }, { role: 'user', content: 'hi' }] }, 'invalid_value', 'input[0]'],
      [
        {
          input: [
            { type: 'compaction', encrypted_content: 'x' },
            { role: 'user', content: 'hi' },
          ],
        },
        'invalid_value',
        'input[0].encrypted_content',
      ],
    ]);
  });

  it('refuses input item types and content parts it cannot give the model; keeps reasoning items in the record', async () => {
    const user = (content: unknown): Obj => ({ role: 'user', content });
    await refused([
      [
        { input: [user('hi'), { type: 'file_search_call', id: 'fs_1', queries: [], status: 'completed' }] },
        'invalid_value',
        'input[1].type',
      ],
      [{ input: [user('hi'), { type: 'bogus' }] }, 'invalid_value', 'input[1].type'],
      [
        { input: [user([{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }])] },
        'invalid_value',
        'input[0].content[0].type',
      ],
      [
        { input: [user([{ type: 'input_file', file_id: 'file-1' }])] },
        'unsupported_value',
        'input[0].content[0].file_id',
      ],
      [
        { input: [user([{ type: 'input_file', file_url: 'https://example.com/a.pdf' }])] },
        'unsupported_value',
        'input[0].content[0].file_url',
      ],
      [
        { input: [user([{ type: 'input_image', file_id: 'file-1', detail: 'auto' }])] },
        'unsupported_value',
        'input[0].content[0].file_id',
      ],
    ]);
    const { key } = await fx.fund(100_000);
    const ok = await post(fx, '/responses', key, {
      model: 'svc-pro',
      input: [
        user([
          { type: 'input_text', text: 'read this' },
          { type: 'input_file', filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' },
        ]),
        { type: 'reasoning', id: 'rs_1', summary: [] },
      ],
    });
    assert.equal(ok.status, 200);
    const sent = fx.upstream.requests[0]?.body['messages'] as Obj[];
    assert.deepEqual(sent[0]?.['content'], [
      { type: 'text', text: 'read this' },
      { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } },
    ]);
  });

  it('refuses hosted tools svc does not run, naming the tool, through the real client', async () => {
    const hosted: Obj[] = [
      { type: 'file_search', vector_store_ids: ['vs_1'] },
      { type: 'code_interpreter', container: { type: 'auto' } },
      { type: 'image_generation' },
      { type: 'computer_use_preview', display_width: 1, display_height: 1, environment: 'linux' },
      { type: 'local_shell' },
      // `mcp` is served (hosted-mcp.test.ts).
    ];
    await refused(hosted.map((tool) => [{ input: 'hi', tools: [tool] }, 'unsupported_value', 'tools[0].type']));
    const { key } = await fx.fund(10_000);
    await assert.rejects(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'hi', tools: [{ type: 'local_shell' }] }),
      (error: unknown) =>
        error instanceof OpenAI.BadRequestError && error.param === 'tools[0].type' && /local_shell/.test(error.message),
    );
  });

  it('tool_choice: a hosted tool svc runs is forced, one it does not is refused, allowed_tools narrows the offer', async () => {
    const fn = (name: string): Obj => ({ type: 'function', name, parameters: { type: 'object', properties: {} } });
    await refused([
      [
        { input: 'hi', tools: [fn('a')], tool_choice: { type: 'file_search' } },
        'unsupported_value',
        'tool_choice.type',
      ],
      [{ input: 'hi', tools: [fn('a')], tool_choice: { type: 'web_search_preview' } }, 'invalid_value', 'tool_choice'],
      [
        {
          input: 'hi',
          tools: [fn('a')],
          tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'zz' }] },
        },
        'invalid_value',
        'tool_choice.tools[0]',
      ],
    ]);
    const { key } = await fx.fund(100_000);
    const forced = await post(fx, '/responses', key, {
      model: 'svc-pro',
      input: 'hi',
      tools: [fn('a'), { type: 'web_search_preview' }],
      tool_choice: { type: 'web_search_preview' },
    });
    assert.equal(forced.status, 200);
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], {
      type: 'function',
      function: { name: 'web_search' },
    });
    assert.deepEqual(((await forced.json()) as Obj)['tool_choice'], { type: 'web_search_preview' });

    const allowed = await post(fx, '/responses', key, {
      model: 'svc-pro',
      input: 'hi',
      tools: [fn('a'), fn('b'), fn('c')],
      tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'b' }] },
    });
    assert.equal(allowed.status, 200);
    // Every tool stays offered (the prompt, and its cache, the same each turn; SPEC §13); the
    // choice reaches the chat upstream as its own allowed_tools.
    const sent = fx.upstream.requests[1]?.body;
    assert.deepEqual(
      (sent?.['tools'] as { function: { name: string } }[]).map((t) => t.function.name),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(sent?.['tool_choice'], {
      type: 'allowed_tools',
      allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'b' } }] },
    });
    const echoed = (await allowed.json()) as Obj;
    assert.equal((echoed['tools'] as Obj[]).length, 3);
    assert.equal((echoed['tool_choice'] as Obj)['type'], 'allowed_tools');
  });

  it("refuses a function_call_output that answers no call, with OpenAI's words", async () => {
    const { key, accountId } = await fx.fund(10_000);
    const { status, error } = await errorOf(
      await post(fx, '/responses', key, {
        model: 'svc-pro',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'function_call_output', call_id: 'call_nowhere', output: '42' },
        ],
      }),
    );
    assert.equal(status, 400);
    assert.equal(error['message'], 'No tool call found for function call output with call_id call_nowhere.');
    assert.equal(error['param'], 'input');
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  it('output limits: max_output_tokens below 16 is a 400; above the model maximum is fitted (output-limit-fitted.test.ts)', async () => {
    await refused([[{ input: 'hi', max_output_tokens: 10 }, 'integer_below_min_value', 'max_output_tokens']]);
    const { key } = await fx.fund(100_000);
    // At the maximum it is served as it is, and nothing is said.
    const raw = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1000 })
      .withResponse();
    assert.equal(fx.upstream.requests[0]?.body['max_tokens'], 1000);
    assert.equal(raw.response.headers.get('x-svc-fitted'), null);
  });

  it('keeps the developer role for an upstream that has it, and sends system where it does not (chat and Responses)', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'be brief' },
      { role: 'user', content: 'hi' },
    ];
    await client.chat.completions.create({ model: 'svc-openai', messages });
    await client.chat.completions.create({ model: 'svc-pro', messages });
    await client.responses.create({
      model: 'svc-openai',
      input: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
    });
    await client.responses.create({
      model: 'svc-pro',
      input: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
    });
    const roles = fx.upstream.requests.map((r) => (r.body['messages'] as Obj[])[0]?.['role']);
    assert.deepEqual(roles, ['developer', 'system', 'developer', 'system']);
  });

  it('chat: allowed_tools reaches a chat upstream unchanged, every tool offered; an unknown one is a 400', async () => {
    const { key } = await fx.fund(100_000);
    const fn = (name: string): OpenAI.Chat.ChatCompletionTool => ({
      type: 'function',
      function: { name, parameters: { type: 'object', properties: {} } },
    });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
    const client = fx.client(key);
    await client.chat.completions.create({
      model: 'svc-pro',
      messages,
      tools: [fn('a'), fn('b'), fn('c')],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'c' } }] },
      },
    });
    // Unchanged to a chat upstream, which takes it (SPEC §13): every tool still offered.
    const sent = fx.upstream.requests[0]?.body;
    assert.deepEqual(
      (sent?.['tools'] as { function: { name: string } }[]).map((t) => t.function.name),
      ['a', 'b', 'c'],
    );
    assert.deepEqual(sent?.['tool_choice'], {
      type: 'allowed_tools',
      allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'c' } }] },
    });
    await assert.rejects(
      client.chat.completions.create({
        model: 'svc-pro',
        messages,
        tools: [fn('a')],
        tool_choice: {
          type: 'allowed_tools',
          allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'zz' } }] },
        },
      }),
      (error: unknown) =>
        error instanceof OpenAI.BadRequestError && error.param === 'tool_choice.allowed_tools.tools[0]',
    );
    assert.equal(fx.upstream.requests.length, 1);
  });

  it('accepts the deprecated function role, as the tool messages that replaced it', async () => {
    const { key } = await fx.fund(100_000);
    const response = await post(fx, '/chat/completions', key, {
      model: 'svc-pro',
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        { role: 'function', name: 'get_weather', content: 'sunny' },
      ],
    });
    assert.equal(response.status, 200, await response.clone().text());
    const sent = fx.upstream.requests[0]?.body['messages'] as Obj[];
    const calls = sent[1]?.['tool_calls'] as Obj[];
    assert.deepEqual(calls[0]?.['function'], { name: 'get_weather', arguments: '{"city":"Oslo"}' });
    assert.equal(sent[2]?.['role'], 'tool');
    assert.equal(sent[2]?.['tool_call_id'], calls[0]?.['id']);
    assert.equal(sent[2]?.['content'], 'sunny');
  });

  it('keeps url_citation annotations the upstream sent, in the Responses shape', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'See example.',
      annotations: [
        {
          type: 'url_citation',
          url_citation: { start_index: 4, end_index: 11, url: 'https://example.com/', title: 'Example' },
        },
      ],
    });
    const response = await fx.client(key).responses.create({ model: 'svc-pro', input: 'hi' });
    const part = (response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0];
    assert.ok(part?.type === 'output_text');
    assert.deepEqual(part.annotations, [
      { type: 'url_citation', start_index: 4, end_index: 11, url: 'https://example.com/', title: 'Example' },
    ]);
  });

  it('an upstream 404 for a misconfigured upstream_model is a 502 upstream_error, not model_not_found', async () => {
    const { key, accountId } = await fx.fund(10_000);
    const notFound = JSON.stringify({
      error: {
        message: 'The model `fake-model-1` does not exist',
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      },
    });
    fx.upstream.enqueue(
      { kind: 'http_error', status: 404, body: notFound },
      { kind: 'http_error', status: 404, body: notFound },
    );
    const { status, error } = await errorOf(
      await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
    );
    assert.equal(status, 502);
    assert.equal(error['type'], 'server_error');
    assert.equal(error['code'], 'upstream_error');
    const responses = await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi' });
    assert.equal(responses.status, 502);
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  it('cancel of a finished response: 400 "only background responses can be cancelled"', async () => {
    const { key } = await fx.fund(100_000);
    const created = await fx.client(key).responses.create({ model: 'svc-pro', input: 'hi' });
    const { status, error } = await errorOf(await post(fx, `/responses/${created.id}/cancel`, key, {}));
    assert.equal(status, 400);
    assert.match(String(error['message']), /^Only background responses can be cancelled/);
  });

  it('names each SSE event as its type', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'tool_calls', calls: [{ id: 'call_1', name: 'f', arguments: '{}' }], text: 'ok' });
    const response = await post(fx, '/responses', key, {
      model: 'svc-pro',
      input: 'hi',
      stream: true,
      tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }],
    });
    const blocks = (await response.text()).split('\n\n').filter((b) => b.includes('data: '));
    assert.ok(blocks.length > 5);
    for (const block of blocks) {
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? '{}') as Obj;
      assert.equal(event, data['type']);
    }
  });

  it('answers CORS preflights for browser clients on the three model APIs, never with credentials', async () => {
    const base = fx.baseURL.replace(/\/v1\/openai$/, '');
    for (const [path, headers] of [
      ['/v1/openai/chat/completions', 'authorization, content-type, x-stainless-os, x-stainless-retry-count'],
      ['/v1/anthropic/v1/messages', 'x-api-key, anthropic-version, anthropic-dangerous-direct-browser-access'],
      ['/v1/gemini/v1beta/models/svc-pro:generateContent', 'x-goog-api-key, content-type'],
    ] as const) {
      const preflight = await fetch(`${base}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': headers,
        },
      });
      assert.equal(preflight.status, 204, path);
      assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
      assert.equal(preflight.headers.get('access-control-allow-credentials'), null);
      assert.deepEqual(
        preflight.headers.get('access-control-allow-headers')?.split(', ').sort(),
        headers.split(', ').sort(),
      );
    }
    const { key } = await fx.fund(10_000);
    const browser = new OpenAI({ baseURL: fx.baseURL, apiKey: key, maxRetries: 0, dangerouslyAllowBrowser: true });
    const page = await browser.models.list().withResponse();
    assert.ok(page.data.data.length > 0);
    const simple = await fetch(`${fx.baseURL}/models`, {
      headers: { origin: 'https://app.example', authorization: `Bearer ${key}` },
    });
    assert.equal(simple.headers.get('access-control-allow-origin'), '*');
    assert.match(simple.headers.get('access-control-expose-headers') ?? '', /x-request-id/);
  });
});
