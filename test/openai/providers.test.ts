import { Readable } from 'node:stream';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { tokenCost, holdAmount } from '../../core/chat/pricing';
import { itemsToMessages, translateRequest } from '../../core/chat/responses/request';
import { createOpenAiProvider } from '../../core/providers/llm/openai/provider';
import { parseSse } from '../../core/providers/llm/openai/sse';
import { createUpstreamAgent } from '../../core/providers/http';
import { createSandboxProvider } from '../../core/providers/llm/sandbox/provider';
import { estimatePromptTokens, promptTokenUpperBound } from '../../core/providers/llm/tokens';
import type { WireChunk, WireMessage } from '../../core/providers/llm/types';
import { isSvcError } from '../../core/errors';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';

async function* pieces(text: string, cuts: number[]): AsyncGenerator<Uint8Array> {
  const bytes = Buffer.from(text, 'utf8');
  let at = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    if (cut <= at || cut >= bytes.length) continue;
    yield bytes.subarray(at, cut);
    at = cut;
  }
  yield bytes.subarray(at);
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}

describe('chat providers and translation (units)', function () {
  describe('parseSse', () => {
    const stream = 'data: {"a":"سلام"}\r\n\r\n: keep-alive\n\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n';

    it('yields the same events however the bytes are split (also inside UTF-8 sequences and CRLF)', async () => {
      const expected = ['{"a":"سلام"}', 'line1\nline2', '[DONE]'];
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 1, max: Buffer.byteLength(stream) - 1 }), { maxLength: 12 }),
          async (cuts) => {
            assert.deepEqual(await collect(parseSse(pieces(stream, cuts))), expected);
          },
        ),
        { numRuns: 200 },
      );
    });

    it('destroys a body left before its end, and leaves one that already ended alone', async () => {
      const open = new Readable({ read() {} });
      open.push(Buffer.from('data: one\n\ndata: two\n\n'));
      for await (const event of parseSse(open)) if (event === 'one') break;
      assert.equal(open.destroyed, true);

      const ended = new Readable({ read() {} });
      ended.push(Buffer.from('data: one\n\ndata: [DONE]\n\n'));
      ended.push(null);
      const seen: string[] = [];
      for await (const event of parseSse(ended)) {
        seen.push(event);
        if (event === '[DONE]') break;
      }
      assert.deepEqual(seen, ['one', '[DONE]']);
      assert.equal(ended.destroyed, false);
    });
  });

  describe('pricing', () => {
    const price = { inputPer1m: 150_000n, outputPer1m: 600_000n };

    it('is the exact rational ceiling of the SPEC formula, at least 1', () => {
      assert.equal(tokenCost(price, 123, 457), 293n);
      assert.equal(tokenCost(price, 0, 0), 1n);
      assert.equal(tokenCost(price, 1, 0), 1n);
      assert.equal(tokenCost({ inputPer1m: 1_000_000n, outputPer1m: 0n }, 7, 99), 7n);
      fc.assert(
        fc.property(fc.nat(10_000_000), fc.nat(10_000_000), fc.nat(5_000_000), fc.nat(5_000_000), (i, o, ip, op) => {
          const cost = tokenCost({ inputPer1m: BigInt(ip), outputPer1m: BigInt(op) }, i, o);
          const exact = BigInt(i) * BigInt(ip) + BigInt(o) * BigInt(op);
          assert.ok(cost >= 1n);
          assert.ok(cost * 1_000_000n >= exact && (cost - 1n) * 1_000_000n < (exact === 0n ? 1n : exact));
        }),
      );
    });

    it('holds at least what any outcome within the limits can cost', () => {
      fc.assert(
        fc.property(
          fc.string({ maxLength: 400 }),
          fc.integer({ min: 1, max: 8192 }),
          fc.nat(8192),
          (text, limit, produced) => {
            const messages: WireMessage[] = [{ role: 'user', content: text }];
            const bound = promptTokenUpperBound(messages);
            assert.ok(bound >= estimatePromptTokens(messages));
            assert.ok(
              holdAmount(price, bound, limit) >=
                tokenCost(price, estimatePromptTokens(messages), Math.min(produced, limit)),
            );
          },
        ),
      );
    });
  });

  describe('Responses → chat translation', () => {
    it('joins consecutive function calls into one assistant turn (an orphan output of a stored turn is skipped)', () => {
      const messages = itemsToMessages([
        { type: 'message', role: 'user', content: 'hi' },
        { type: 'function_call', call_id: 'a', name: 'f', arguments: '{}' },
        { type: 'function_call', call_id: 'b', name: 'g', arguments: '{"x":1}' },
        { type: 'function_call_output', call_id: 'a', output: '1' },
        { type: 'function_call_output', call_id: 'b', output: '2' },
        { type: 'function_call_output', call_id: 'zzz', output: 'orphan' },
      ]);
      assert.deepEqual(
        messages.map((m) => m.role),
        ['user', 'assistant', 'tool', 'tool'],
      );
      assert.deepEqual(
        messages[1]?.tool_calls?.map((c) => c.id),
        ['a', 'b'],
      );
    });

    it("maps text.format json_schema to response_format; a hosted web_search becomes svc's own search function", () => {
      const t = translateRequest(
        {
          model: 'm',
          input: 'x',
          text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
          tools: [{ type: 'web_search' }, { type: 'function', name: 'f', parameters: { type: 'object' } }],
          tool_choice: { type: 'web_search' },
        },
        [],
      );
      assert.deepEqual(t.body['response_format'], {
        type: 'json_schema',
        json_schema: { name: 'out', schema: { type: 'object' }, strict: true },
      });
      // svc runs the hosted search itself (core/chat/responses/hosted-search.ts): the model sees
      // it as a function beside the client's own.
      assert.deepEqual(
        t.body.tools?.map((x) => x.function.name),
        ['web_search', 'f'],
      );
      // Naming the hosted tool forces the function that stands for it (SPEC §7d: not `auto`).
      assert.deepEqual(t.body.tool_choice, { type: 'function', function: { name: 'web_search' } });
      assert.deepEqual(t.echo.toolChoice, { type: 'web_search' });
    });
  });

  describe('sandbox provider', () => {
    const sandbox = createSandboxProvider();
    const signal = new AbortController().signal;

    it('is deterministic and labelled', async () => {
      const request = { model: 'sandbox', messages: [{ role: 'user' as const, content: 'Hello there' }] };
      const a = await sandbox.complete(request, signal);
      const b = await sandbox.complete(request, signal);
      assert.equal(a.choices[0]?.message.content, b.choices[0]?.message.content);
      assert.match(a.choices[0]?.message.content ?? '', /^\[sandbox\]/);
      assert.equal(a.system_fingerprint, 'fp_svc_sandbox');
    });

    it('streams a tool call when asked, with usage last', async () => {
      const chunks = await collect(
        sandbox.stream(
          {
            model: 'sandbox',
            messages: [{ role: 'user', content: 'please call get_weather for Tehran' }],
            tools: [
              {
                type: 'function',
                function: {
                  name: 'get_weather',
                  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
                },
              },
            ],
          },
          signal,
        ),
      );
      const deltas = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []));
      assert.equal(deltas[0]?.function?.name, 'get_weather');
      assert.ok(deltas[0]?.id);
      const args = JSON.parse(deltas.map((d) => d.function?.arguments ?? '').join('')) as Record<string, unknown>;
      assert.equal(typeof args['city'], 'string');
      assert.equal(chunks.at(-2)?.choices[0]?.finish_reason, 'tool_calls');
      assert.deepEqual(chunks.at(-1)?.choices, []);
      assert.ok((chunks.at(-1)?.usage?.completion_tokens ?? 0) > 0);
    });

    // Claude Code's turn: its context in a <system-reminder> ahead of the person's words, and a
    // system message after the user turn.
    const claudeCodeTurn = (prompt: string) => ({
      model: 'sandbox',
      messages: [
        { role: 'system' as const, content: 'You are Claude Code.' },
        {
          role: 'user' as const,
          content: `<system-reminder>\nContext: call a tool or function when useful.\n</system-reminder>\n\n${prompt}`,
        },
        { role: 'system' as const, content: 'Available agent types for the Agent tool: …' },
      ],
      tools: ['Agent', 'mcp__svc__maps_search_places'].map((name) => ({
        type: 'function' as const,
        function: {
          name,
          parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
        },
      })),
    });

    it('calls the tool a user turn names even when a system message follows it', async () => {
      const a = await sandbox.complete(claudeCodeTurn('find pharmacies with mcp__svc__maps_search_places'), signal);
      const call = a.choices[0]?.message.tool_calls?.[0];
      assert.equal(call?.function.name, 'mcp__svc__maps_search_places');
      assert.deepEqual(JSON.parse(call?.function.arguments ?? '{}'), {
        query: 'find pharmacies with mcp__svc__maps_search_places',
      });
      assert.equal(a.choices[0]?.finish_reason, 'tool_calls');
    });

    it("answers the person's words, not the client's <system-reminder> context", async () => {
      const a = await sandbox.complete(claudeCodeTurn('Say hello'), signal);
      assert.equal(a.choices[0]?.message.tool_calls, undefined);
      assert.match(a.choices[0]?.message.content ?? '', /You said: "Say hello" \(2 words\)/);
    });

    it("skips Gemini CLI's <session_context> the same way", async () => {
      const request = claudeCodeTurn('');
      request.messages[1] = {
        role: 'user',
        content: '<session_context>\nThis is the Gemini CLI. Call a tool when useful.\n</session_context>\n\nSay hello',
      };
      const a = await sandbox.complete(request, signal);
      assert.equal(a.choices[0]?.message.tool_calls, undefined);
      assert.match(a.choices[0]?.message.content ?? '', /You said: "Say hello" \(2 words\)/);
    });
  });

  describe('openai provider', () => {
    let upstream: FakeUpstream;
    const agent = createUpstreamAgent();
    before(async () => {
      upstream = await startFakeUpstream();
    });
    after(async () => {
      await agent.close();
      await upstream.close();
    });

    const provider = (timeoutMs = 30_000) =>
      createOpenAiProvider({
        baseUrl: upstream.baseUrl,
        apiKey: 'k',
        timeoutMs,
        dispatcher: agent,
        modelId: 'svc-pro',
        upstreamModel: 'fake-model-1',
      });

    it('aborts the upstream request when the signal fires', async () => {
      upstream.enqueue({ kind: 'stall', afterPieces: 1 });
      const controller = new AbortController();
      const received: WireChunk[] = [];
      const error = await (async () => {
        for await (const chunk of provider().stream(
          { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
          controller.signal,
        )) {
          received.push(chunk);
          if (chunk.choices[0]?.delta.content === 'one ') controller.abort();
        }
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(isSvcError(error) && error.code === 'cancelled', String(error));
      for (let i = 0; i < 200 && upstream.aborted === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
      assert.equal(upstream.aborted, 1);
    });

    it('reuses keep-alive connections across requests', async () => {
      upstream.reset();
      for (let i = 0; i < 10; i += 1)
        await provider().complete(
          { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
          new AbortController().signal,
        );
      const ports = new Set(upstream.requests.map((r) => r.remotePort));
      assert.equal(upstream.requests.length, 10);
      // Sequential requests reuse pooled connections (a new one may open while the last is released).
      assert.ok(ports.size <= 2, `${ports.size} connections for 10 sequential requests`);
    });
  });
});
