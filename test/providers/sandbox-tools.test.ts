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

  it('calls nothing when no offered tool is named and none is asked for', async () => {
    const completion = await client.chat.completions.create({
      model: 'svc-pro',
      tools: [tool('mcp__svc__maps_search_places')],
      messages: [{ role: 'user', content: 'Say hello in Persian.' }],
    });
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
  });
});
