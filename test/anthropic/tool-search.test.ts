import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

/*
 * Claude Code's deferred tools (`defer_loading` + its ToolSearch tool), served over a chat
 * upstream instead of the 400 `tools.N.defer_loading` it got before: a deferred tool is not
 * offered until a tool_result's `tool_reference` loads it, and then it is.
 */

type Obj = Record<string, unknown>;

const schema = { type: 'object' as const, properties: { query: { type: 'string' } } };
const tools = [
  { name: 'ToolSearch', description: 'Search the deferred tools by name and description.', input_schema: schema },
  { name: 'Read', description: 'Read a file.', input_schema: schema },
  {
    name: 'mcp__svc__web_search',
    description: 'Search the web.',
    input_schema: schema,
    defer_loading: true,
  },
] as unknown as Anthropic.Messages.Tool[];

describe('Anthropic API: deferred tools and tool search (Claude Code)', function () {
  let fx: AnthropicFixture;
  before(async () => {
    fx = await startAnthropicFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  const upstreamTools = (i: number): string[] =>
    ((fx.upstream.requests[i]?.body['tools'] as { function: { name: string } }[] | undefined) ?? []).map(
      (t) => t.function.name,
    );

  it('keeps a deferred tool back until a tool_reference loads it, then offers it', async () => {
    const { key } = await fx.fund(1_000_000);
    const client = fx.anthropic(key);
    const first = await client.messages.create({
      model: 'svc-pro',
      max_tokens: 100,
      tools,
      messages: [{ role: 'user', content: 'search the web for svc' }],
    });
    assert.equal(first.type, 'message');
    assert.deepEqual(upstreamTools(0), ['ToolSearch', 'Read']);

    await client.messages.create({
      model: 'svc-pro',
      max_tokens: 100,
      tools,
      messages: [
        { role: 'user', content: 'search the web for svc' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'tu_1', name: 'ToolSearch', input: { query: 'web' } }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'tu_1',
              content: [{ type: 'tool_reference', tool_name: 'mcp__svc__web_search' }],
            },
          ],
        },
      ] as unknown as Anthropic.Messages.MessageParam[],
    });
    assert.deepEqual(upstreamTools(1), ['ToolSearch', 'Read', 'mcp__svc__web_search']);
    const messages = fx.upstream.requests[1]?.body['messages'] as Obj[];
    const result = messages.find((m) => m['role'] === 'tool');
    assert.match(String(result?.['content']), /Tool 'mcp__svc__web_search' is now available: Search the web\./);
  });

  it('refuses a tool_reference to a tool the request does not have, charging nothing', async () => {
    const { key, accountId } = await fx.fund(10_000);
    await assert.rejects(
      fx.anthropic(key).messages.create({
        model: 'svc-pro',
        max_tokens: 100,
        tools,
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'tu_1', name: 'ToolSearch', input: {} }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'tool_reference', tool_name: 'nope' }] },
            ],
          },
        ] as unknown as Anthropic.Messages.MessageParam[],
      }),
      (error: unknown) => error instanceof Anthropic.BadRequestError && /tool 'nope' is not among/.test(error.message),
    );
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 10_000n);
  });
});
