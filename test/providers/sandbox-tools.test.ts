import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';

const tool = (name: string): OpenAI.Chat.Completions.ChatCompletionTool => ({
  type: 'function',
  function: {
    name,
    description: 'Search places',
    parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  },
});

// Issue 33, point 5: the README's prompts name svc's tool bare (`maps_search_places`) while the
// coding assistants offer it prefixed; the sandbox model must call it in every combination.
describe('the sandbox model calls a tool named bare or with an MCP client prefix', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let client: OpenAI;

  before(async () => {
    svc = await startSvc();
    client = new OpenAI({ apiKey: (await svc.createFundedKey(1_000_000)).key, baseURL: `${svc.baseUrl}/v1/openai` });
  });

  after(async () => {
    await svc?.close();
  });

  const offered = {
    codex: 'mcp__svc__maps_search_places',
    gemini: 'mcp_svc_maps_search_places',
    bare: 'maps_search_places',
  };
  const prompts = [
    'Use maps_search_places to find a cafe in Tehran.',
    'Call mcp__svc__maps_search_places for a cafe in Tehran.',
    'Call mcp_svc_maps_search_places for a cafe in Tehran.',
  ];

  for (const [client_, name] of Object.entries(offered)) {
    for (const prompt of prompts) {
      it(`${client_} offers ${name}; the prompt says "${prompt.split(' ')[1] ?? ''}"`, async () => {
        const completion = await client.chat.completions.create({
          model: 'svc-pro',
          // Another tool first, as the assistants send theirs (shell, read_file) before svc's.
          tools: [tool('shell'), tool(name)],
          messages: [{ role: 'user', content: prompt }],
        });
        const call = completion.choices[0]?.message.tool_calls?.[0];
        assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
        assert.equal(call?.type === 'function' ? call.function.name : undefined, name);
      });
    }
  }

  // Claude Code defers MCP tools: only its ToolSearch is offered, and a trailing system message
  // lists the deferred names ("Use ToolSearch with query \"select:<name>\""). The sandbox searches
  // for the named tool, calls it once loaded, and answers after its result.
  it('a named tool that is deferred: ToolSearch select:<name>, then the tool once offered, then the answer', async () => {
    const deferred =
      'The following deferred tools are now available via ToolSearch. Use ToolSearch with query "select:<name>" ' +
      'to load tool schemas before calling them:\nWebFetch\nmcp__svc__maps_search_places\nmcp__svc__web_search';
    const prompt = 'Call maps_search_places to find Tajrish Square.';
    const first = await client.chat.completions.create({
      model: 'svc-pro',
      tools: [tool('Agent'), tool('ToolSearch')],
      messages: [
        { role: 'system', content: 'You are an assistant; maps_search_places finds places.' },
        { role: 'user', content: prompt },
        { role: 'system', content: deferred },
      ],
    });
    const search = first.choices[0]?.message.tool_calls?.[0];
    assert.equal(search?.type === 'function' ? search.function.name : undefined, 'ToolSearch');
    assert.deepEqual(JSON.parse(search?.type === 'function' ? search.function.arguments : '{}'), {
      query: 'select:mcp__svc__maps_search_places',
    });

    const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'user', content: prompt },
      { role: 'system', content: deferred },
      { role: 'assistant', content: null, tool_calls: first.choices[0]?.message.tool_calls ?? [] },
      { role: 'tool', tool_call_id: search?.id ?? '', content: "Tool 'mcp__svc__maps_search_places' is now available" },
    ];
    const tools = [tool('Agent'), tool('ToolSearch'), tool('mcp__svc__maps_search_places')];
    const second = await client.chat.completions.create({ model: 'svc-pro', tools, messages: history });
    const maps = second.choices[0]?.message.tool_calls?.[0];
    assert.equal(maps?.type === 'function' ? maps.function.name : undefined, 'mcp__svc__maps_search_places');

    const third = await client.chat.completions.create({
      model: 'svc-pro',
      tools,
      messages: [
        ...history,
        { role: 'assistant', content: null, tool_calls: second.choices[0]?.message.tool_calls ?? [] },
        { role: 'tool', tool_call_id: maps?.id ?? '', content: '{"results":[{"name":"Tajrish"}]}' },
      ],
    });
    assert.equal(third.choices[0]?.finish_reason, 'stop');
    assert.match(third.choices[0]?.message.content ?? '', /The tool returned/);
  });

  it('without ToolSearch offered, a tool named only in the system text is not called', async () => {
    const completion = await client.chat.completions.create({
      model: 'svc-pro',
      tools: [tool('shell')],
      messages: [
        { role: 'user', content: 'Find Tajrish with maps_search_places.' },
        { role: 'system', content: 'Deferred: mcp__svc__maps_search_places' },
      ],
    });
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
  });

  it('a prompt that asks for a tool without naming one: the tool sharing a word, never a sub-agent first', async () => {
    const ask = async (tools: string[], content: string): Promise<string | undefined> => {
      const completion = await client.chat.completions.create({
        model: 'svc-pro',
        tools: tools.map(tool),
        messages: [{ role: 'user', content }],
      });
      const call = completion.choices[0]?.message.tool_calls?.[0];
      return call?.type === 'function' ? call.function.name : undefined;
    };
    // Claude Code offers Agent first: calling it would hand the same prompt to a sub-agent, which recurses.
    assert.equal(
      await ask(['Agent', 'Bash', 'mcp__svc__maps_search_places'], 'Call the maps tool for Tajrish.'),
      'mcp__svc__maps_search_places',
    );
    assert.equal(await ask(['Agent', 'Task', 'Bash'], 'Call a tool, any tool.'), 'Bash');
    assert.equal(await ask(['Agent'], 'Call a tool, any tool.'), undefined);
  });

  it('calls nothing when no offered tool is named and none is asked for', async () => {
    const completion = await client.chat.completions.create({
      model: 'svc-pro',
      tools: [tool('mcp__svc__maps_search_places')],
      messages: [{ role: 'user', content: 'Say hello in Persian.' }],
    });
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
  });
});
