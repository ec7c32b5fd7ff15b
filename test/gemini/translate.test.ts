import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ChatCompletion, ChatCompletionChunk, ChatRole } from '../../gen/svc/core/v1/chat';
import { resolveModel } from '../../adapters/gemini/aliases';
import { groundedJson } from '../../adapters/gemini/grounding';
import { parseGenerateRequest } from '../../adapters/gemini/request';
import { jsonSchemaOf } from '../../adapters/gemini/tools';
import { GenerateStream, generateContentJson } from '../../adapters/gemini/response';

type Json = Record<string, unknown>;

const FIXTURES = path.join(__dirname, '..', 'fixtures', 'gemini');
const sample = (name: string): Json => JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8')) as Json;
const frames = (name: string): Json[] =>
  fs
    .readFileSync(path.join(FIXTURES, name), 'utf8')
    .split('\r\n\r\n')
    .filter((f) => f.startsWith('data: '))
    .map((f) => JSON.parse(f.slice('data: '.length)) as Json);

/** The key paths of a JSON value (array elements merged), for comparing shapes with Google's samples. */
function shape(value: unknown, at = ''): Set<string> {
  const out = new Set<string>();
  if (Array.isArray(value)) for (const v of value) for (const p of shape(v, `${at}[]`)) out.add(p);
  else if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) {
      out.add(`${at}.${k}`);
      for (const p of shape(v, `${at}.${k}`)) out.add(p);
    }
  return out;
}

const user = (text: string): Json => ({ role: 'user', parts: [{ text }] });

/*
 * The Gemini adapter's translators alone: what they emit against Google's recorded answers
 * (test/fixtures/gemini), and what they make of the requests Gemini CLI and the SDK send.
 */
describe('Gemini translation (adapters/gemini)', () => {
  describe('answers, against recorded samples', () => {
    it('a thinking answer: thoughts apart from candidates, total = prompt + candidates + thoughts, as recorded', () => {
      const recorded = sample('generate-content-thinking.json');
      const ours = generateContentJson(
        ChatCompletion.fromPartial({
          id: 'chatcmpl-1',
          model: 'svc-pro',
          choices: [
            {
              index: 0,
              finishReason: 'stop',
              message: { role: ChatRole.CHAT_ROLE_ASSISTANT, content: 'Mountain View', reasoningContent: 'Thinking…' },
            },
          ],
          usage: { promptTokens: 14n, completionTokens: 26n, reasoningTokens: 24n, totalTokens: 40n },
        }),
        true,
      );
      assert.deepEqual(
        (ours['usageMetadata'] as Json)['totalTokenCount'],
        (recorded['usageMetadata'] as Json)['totalTokenCount'],
      );
      for (const field of ['promptTokenCount', 'candidatesTokenCount', 'thoughtsTokenCount'])
        assert.equal((ours['usageMetadata'] as Json)[field], (recorded['usageMetadata'] as Json)[field], field);
      const parts = ((ours['candidates'] as Json[])[0]?.['content'] as Json)['parts'];
      assert.deepEqual(parts, [{ text: 'Thinking…', thought: true }, { text: 'Mountain View' }]);
      const missing = [...shape(recorded)].filter((p) => !shape(ours).has(p));
      assert.deepEqual(missing, [], 'every field of the recorded answer is in ours');
    });

    it('a function call: the recorded shape (a functionCall part, role model, finishReason STOP)', () => {
      const recorded = sample('function-call.json');
      const ours = generateContentJson(
        ChatCompletion.fromPartial({
          id: 'chatcmpl-2',
          model: 'svc-pro',
          choices: [
            {
              index: 0,
              finishReason: 'tool_calls',
              message: {
                role: ChatRole.CHAT_ROLE_ASSISTANT,
                toolCalls: [
                  {
                    id: 'call_1',
                    type: 'function',
                    function: { name: 'customDivide', arguments: '{"denominator":2,"numerator":100}' },
                  },
                ],
              },
            },
          ],
          usage: { promptTokens: 21n, completionTokens: 6n, totalTokens: 27n },
        }),
        false,
      );
      const rc = (recorded['candidates'] as Json[])[0] as Json;
      const oc = (ours['candidates'] as Json[])[0] as Json;
      assert.equal(oc['finishReason'], rc['finishReason']);
      const recordedCall = ((rc['content'] as Json)['parts'] as Json[])[0]?.['functionCall'] as Json;
      const ourCall = ((oc['content'] as Json)['parts'] as Json[])[0]?.['functionCall'] as Json;
      assert.deepEqual({ name: ourCall['name'], args: ourCall['args'] }, recordedCall);
      // Only the fields Google records that svc has no counterpart for may be missing.
      const missing = [...shape(recorded)].filter((p) => !shape(ours).has(p));
      assert.deepEqual(
        missing.filter((p) => !/avgLogprobs|TokensDetails/.test(p)),
        [],
      );
    });

    it('a stream: text frames, then the last with finishReason and usage, shaped as the recorded stream', () => {
      const recorded = frames('stream-generate-content.sse.txt');
      const stream = new GenerateStream('svc-pro', false);
      const chunk = (
        content: string | undefined,
        finish = '',
        usage?: Partial<NonNullable<ChatCompletionChunk['usage']>>,
      ): ChatCompletionChunk =>
        ChatCompletionChunk.fromPartial({
          id: 'chatcmpl-3',
          model: 'svc-pro',
          choices:
            usage === undefined
              ? [{ index: 0, delta: content === undefined ? {} : { content }, finishReason: finish }]
              : [],
          ...(usage === undefined ? {} : { usage }),
        });
      const ours = [
        ...stream.chunk(chunk('The')),
        ...stream.chunk(chunk(' capital of Wyoming')),
        ...stream.chunk(chunk(' is **Cheyenne**.\n', 'stop')),
        ...stream.chunk(chunk(undefined, '', { promptTokens: 7n, completionTokens: 10n, totalTokens: 17n })),
        stream.end(),
      ];
      const text = (fs: Json[]): string =>
        fs
          .flatMap((f) => ((f['candidates'] as Json[])[0]?.['content'] as Json)['parts'] as Json[])
          .map((p) => String(p['text'] ?? ''))
          .join('');
      assert.equal(text(ours), text(recorded));
      const last = ours.at(-1) as Json;
      const recordedLast = recorded.at(-1) as Json;
      assert.equal((last['candidates'] as Json[])[0]?.['finishReason'], 'STOP');
      for (const field of ['promptTokenCount', 'candidatesTokenCount', 'totalTokenCount'])
        assert.equal((last['usageMetadata'] as Json)[field], (recordedLast['usageMetadata'] as Json)[field]);
      assert.ok(ours.slice(0, -1).every((f) => f['usageMetadata'] === undefined && f['modelVersion'] === 'svc-pro'));
    });

    it('grounding: chunks, queries and supports (UTF-8 byte offsets) from a Responses answer with searches', () => {
      const text = 'دیدن https://example.com/a و https://example.org/b';
      const answer = groundedJson(
        {
          id: 'resp_1',
          model: 'svc-pro',
          status: 'completed',
          output: [
            {
              type: 'web_search_call',
              action: { type: 'search', query: 'q1', sources: [{ type: 'url', url: 'https://example.com/a' }] },
            },
            {
              type: 'message',
              content: [
                {
                  type: 'output_text',
                  text,
                  annotations: [
                    { type: 'url_citation', start_index: 5, end_index: 26, url: 'https://example.com/a', title: 'A' },
                    { type: 'url_citation', start_index: 29, end_index: 50, url: 'https://example.org/b', title: 'B' },
                  ],
                },
              ],
            },
          ],
          usage: { input_tokens: 100, output_tokens: 20 },
        },
        false,
      );
      const g = (answer['candidates'] as Json[])[0]?.['groundingMetadata'] as Json;
      assert.deepEqual(g['webSearchQueries'], ['q1']);
      assert.deepEqual(g['groundingChunks'], [
        { web: { uri: 'https://example.com/a', title: 'A' } },
        { web: { uri: 'https://example.org/b', title: 'B' } },
      ]);
      const supports = g['groundingSupports'] as Json[];
      const bytes = Buffer.from(text);
      for (const [i, s] of supports.entries()) {
        const seg = s['segment'] as { startIndex: number; endIndex: number; text: string };
        assert.equal(bytes.subarray(seg.startIndex, seg.endIndex).toString(), seg.text);
        assert.deepEqual(s['groundingChunkIndices'], [i]);
      }
      assert.deepEqual((answer['usageMetadata'] as Json)['totalTokenCount'], 120);
    });
  });

  describe('requests', () => {
    it("Gemini CLI's turn: parametersJsonSchema, client ids and thoughtSignature echoed back, topK ignored", () => {
      const parsed = parseGenerateRequest(
        {
          contents: [
            user('find the ts files'),
            {
              role: 'model',
              parts: [
                { text: 'thinking…', thought: true },
                {
                  functionCall: { id: 'glob_1795596401557_0', name: 'glob', args: { pattern: '*.ts' } },
                  thoughtSignature: 'skip_thought_signature_validator',
                },
              ],
            },
            {
              role: 'user',
              parts: [{ functionResponse: { id: 'glob_1795596401557_0', name: 'glob', response: { output: 'a.ts' } } }],
            },
          ],
          systemInstruction: { parts: [{ text: 'You are Gemini CLI.' }] },
          tools: [
            {
              functionDeclarations: [
                { name: 'glob', description: 'Find files', parametersJsonSchema: { type: 'object' } },
              ],
            },
          ],
          generationConfig: { temperature: 1, topP: 0.95, topK: 64, thinkingConfig: { includeThoughts: true } },
        },
        'svc-pro',
      );
      assert.deepEqual(
        parsed.params.messages.map((m) => [m.role, m.content ?? null, m.toolCalls.map((c) => c.id), m.toolCallId]),
        [
          [ChatRole.CHAT_ROLE_SYSTEM, 'You are Gemini CLI.', [], ''],
          [ChatRole.CHAT_ROLE_USER, 'find the ts files', [], ''],
          [ChatRole.CHAT_ROLE_ASSISTANT, null, ['glob_1795596401557_0'], ''],
          [ChatRole.CHAT_ROLE_TOOL, 'a.ts', [], 'glob_1795596401557_0'],
        ],
      );
      assert.equal(parsed.includeThoughts, true);
      assert.deepEqual(parsed.ignored, ['generationConfig.topK']);
      assert.equal(parsed.params.temperature, 1);
      assert.deepEqual(parsed.params.tools[0]?.function?.parameters, { type: 'object' });
    });

    it('proto (snake_case) field names are read like camelCase ones', () => {
      const parsed = parseGenerateRequest(
        {
          contents: [user('hi')],
          system_instruction: { parts: [{ text: 'Be brief.' }] },
          generation_config: { max_output_tokens: 20, stop_sequences: ['x'], response_mime_type: 'application/json' },
          tool_config: { function_calling_config: { mode: 'NONE' } },
        },
        'svc-pro',
      );
      assert.equal(parsed.params.messages[0]?.content, 'Be brief.');
      assert.equal(parsed.params.maxTokens, 20);
      assert.deepEqual(parsed.params.stop, ['x']);
      assert.equal(parsed.params.responseFormat?.type, 'json_object');
      assert.deepEqual(parsed.params.toolChoice?.choice, { $case: 'mode', value: 'none' });
    });

    it('a functionResponse without an id answers the oldest open call of that name; a second one is refused', () => {
      const call = { functionCall: { name: 'f', args: {} } };
      const parsed = parseGenerateRequest(
        {
          contents: [
            user('go'),
            { role: 'model', parts: [call, call] },
            {
              role: 'user',
              parts: [
                { functionResponse: { name: 'f', response: { a: 1 } } },
                { functionResponse: { name: 'f', response: {} } },
              ],
            },
          ],
        },
        'm',
      );
      const calls = parsed.params.messages[1]?.toolCalls.map((c) => c.id);
      assert.deepEqual(
        parsed.params.messages.slice(2).map((m) => [m.toolCallId, m.content]),
        [
          [calls?.[0], '{"a":1}'],
          [calls?.[1], '{}'],
        ],
      );
      assert.throws(
        () =>
          parseGenerateRequest(
            {
              contents: [
                user('go'),
                { role: 'model', parts: [call] },
                {
                  role: 'user',
                  parts: [
                    { functionResponse: { name: 'f', response: {} } },
                    { functionResponse: { name: 'f', response: {} } },
                  ],
                },
              ],
            },
            'm',
          ),
        (e: unknown) => (e as { param?: string }).param === 'contents[2].parts[1].functionResponse.name',
      );
    });

    it("Google's Schema becomes JSON Schema: lower-case types, nullable, int64 strings", () => {
      assert.deepEqual(
        jsonSchemaOf(
          {
            type: 'OBJECT',
            properties: {
              tags: { type: 'ARRAY', items: { type: 'STRING', enum: ['a', 'b'] }, minItems: '1', propertyOrdering: [] },
              note: { type: 'STRING', nullable: true, description: 'optional' },
            },
            required: ['tags'],
          },
          'x',
        ),
        {
          type: 'object',
          properties: {
            tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] }, minItems: 1 },
            note: { type: ['string', 'null'], description: 'optional' },
          },
          required: ['tags'],
        },
      );
    });
  });

  describe('model aliases', () => {
    const lookup = (configured: string[]) => ({
      exists: (id: string) => Promise.resolve(configured.includes(id)),
      first: () => Promise.resolve(configured[0] === undefined ? undefined : ({ id: configured[0] } as never)),
    });
    it('a configured name is itself; other gemini-* names go to the alias, then the default, then the first model', async () => {
      const none = { table: new Map<string, string>() };
      assert.equal(await resolveModel('gemini-2.5-pro', none, lookup(['svc-pro', 'gemini-2.5-pro'])), 'gemini-2.5-pro');
      assert.equal(await resolveModel('gemini-3.8-flash', none, lookup(['svc-pro', 'svc-mini'])), 'svc-pro');
      const table = {
        table: new Map([
          ['gemini-3.5-flash-lite', 'svc-mini'],
          ['default', 'svc-big'],
        ]),
      };
      assert.equal(await resolveModel('gemini-3.5-flash-lite', table, lookup(['svc-pro'])), 'svc-mini');
      assert.equal(await resolveModel('gemini-3.8-flash', table, lookup(['svc-pro'])), 'svc-big');
      assert.equal(await resolveModel('gpt-x', table, lookup(['svc-pro'])), 'gpt-x');
    });
  });
});
