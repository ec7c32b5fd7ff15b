import assert from 'node:assert/strict';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * The fast path (core/chat/fast-path.ts) and the translated path side by side: the same streams,
 * the same text, usage, money and records on both; on the fast path the upstream's chunks reach
 * the client as the upstream wrote them (its ids, fields the translation does not know), svc's
 * model id in place of the upstream's. The rest of the OpenAI suites run on whichever path
 * SVC_FAST_PATH picks (on by default; CI runs them again with SVC_FAST_PATH=0).
 */

type Chunk = Record<string, unknown> & { id: string; model: string; choices: Record<string, unknown>[] };

interface Streamed {
  readonly chunks: Chunk[];
  readonly raw: string;
  readonly status: number;
}

async function stream(fx: OpenAiFixture, key: string, body: Record<string, unknown>): Promise<Streamed> {
  const response = await fetch(`${fx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-pro', stream: true, ...body }),
  });
  const raw = await response.text();
  const chunks: Chunk[] = [];
  for (const frame of raw.split('\n\n')) {
    // As an SSE client reads it: every line a field or a comment, the data lines joined.
    const lines = frame.split('\n').filter((line) => line !== '');
    for (const line of lines) assert.match(line, /^(data: |: )/, `an SSE line: ${line}`);
    const data = lines.filter((line) => line.startsWith('data: ')).map((line) => line.slice(6));
    if (data.length === 0 || data[0] === '[DONE]') continue;
    chunks.push(JSON.parse(data.join('\n')) as Chunk);
  }
  return { chunks, raw, status: response.status };
}

const text = (chunks: Chunk[]): string =>
  chunks
    .map((c) => ((c.choices[0]?.['delta'] as Record<string, unknown> | undefined)?.['content'] as string) ?? '')
    .join('');

/** An SSE answer of the upstream's own making (the fake's `garbage` behaviour sends it as it is). */
function sse(frames: readonly unknown[]): string {
  return frames.map((f) => `data: ${typeof f === 'string' ? f : JSON.stringify(f)}\n\n`).join('');
}

const base = { object: 'chat.completion.chunk', created: 1_700_000_000, model: 'fake-model-1' };

for (const fast of [true, false]) {
  describe(`OpenAI API: chat streams on the ${fast ? 'fast' : 'translated'} path`, function () {
    let fx: OpenAiFixture;
    const previous = process.env['SVC_FAST_PATH'];

    before(async () => {
      // The config decides here, whatever the run's SVC_FAST_PATH says.
      delete process.env['SVC_FAST_PATH'];
      fx = await startOpenAiFixture({ extraConfig: `chat:\n  fast_path: ${fast}\n` });
    });
    after(async () => {
      if (previous === undefined) delete process.env['SVC_FAST_PATH'];
      else process.env['SVC_FAST_PATH'] = previous;
      await fx.close();
    });
    beforeEach(() => fx.upstream.reset());

    it('streams text with include_usage and bills the upstream usage; the ids say which path served it', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'one two three', usage: { prompt_tokens: 40, completion_tokens: 4 } });
      const { chunks, raw } = await stream(fx, key, {
        messages: [
          { role: 'developer', content: 'Be brief.' },
          { role: 'user', content: 'count' },
        ],
        stream_options: { include_usage: true },
        max_tokens: 100,
      });
      for (const c of chunks) assertSchema('CreateChatCompletionStreamResponse', c);
      assert.equal(text(chunks), 'one two three');
      assert.ok(
        chunks.every((c) => c.model === 'svc-pro'),
        'svc’s model id, never the upstream’s',
      );
      assert.ok(!raw.includes('fake-model-1'));
      assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
      // The fake numbers its answers chatcmpl-fakeN: the fast path forwards them, the translation makes its own.
      assert.equal(chunks[0]?.id.startsWith('chatcmpl-fake'), fast);
      const last = chunks[chunks.length - 1];
      assert.deepEqual(last?.choices, []);
      const usage = last?.['usage'] as Record<string, unknown>;
      assert.equal(usage['prompt_tokens'], 40);
      assert.equal(usage['completion_tokens'], 4);
      assert.equal(usage['cost'], Number(expectedCost(40, 4)));
      for (const c of chunks.slice(0, -1)) assert.equal(c['usage'], null);
      assert.match(raw, /: svc-cost \d+ balance \d+\n\ndata: \[DONE\]\n\n$/);
      const sent = fx.upstream.requests[0]?.body;
      assert.equal(sent?.['model'], 'fake-model-1');
      assert.equal(sent?.['max_tokens'], 100);
      assert.deepEqual(sent?.['stream_options'], { include_usage: true });
      assert.deepEqual(
        (sent?.['messages'] as { role: string }[]).map((m) => m.role),
        ['system', 'user'],
        'developer goes as system to an upstream without developer_role',
      );
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(40, 4));
      const records = await fx.svc.store.db
        .selectFrom('usage_records')
        .select(['status', 'cost', 'input_tokens', 'output_tokens'])
        .where('account_id', '=', accountId)
        .execute();
      assert.deepEqual(records, [{ status: 'ok', cost: expectedCost(40, 4), input_tokens: 40n, output_tokens: 4n }]);
    });

    it('without include_usage: no usage on any chunk, none at the end, usage still asked upstream and billed', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const { chunks } = await stream(fx, key, { messages: [{ role: 'user', content: 'hi' }] });
      assert.ok(chunks.length > 1);
      assert.ok(chunks.every((c) => c.choices.length === 1 && !('usage' in c)));
      assert.deepEqual(fx.upstream.requests[0]?.body['stream_options'], { include_usage: true });
      assert.equal(
        (await fx.settled(accountId)).balance,
        100_000n - expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens),
      );
    });

    it('keeps what the upstream sends beyond the translation’s fields on the fast path, normalises quirks on both', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const usage = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 };
      fx.upstream.enqueue({
        kind: 'garbage',
        body: sse([
          {
            id: 'up-1',
            ...base,
            choices: [{ index: 0, delta: { role: 'assistant', content: 'a' }, finish_reason: null }],
            usage: null,
            obfuscation: 'xyz',
          },
          // OpenRouter's `reasoning`: the translation calls it reasoning_content, on both paths.
          {
            id: 'up-1',
            ...base,
            choices: [{ index: 0, delta: { reasoning: 'think' }, finish_reason: null }],
            usage: null,
          },
          { id: 'up-1', ...base, choices: [{ index: 0, delta: { content: 'b' }, finish_reason: 'stop' }], usage: null },
          { id: 'up-1', ...base, choices: [], usage },
          '[DONE]',
        ]),
      });
      const { chunks } = await stream(fx, key, {
        messages: [{ role: 'user', content: 'hi' }],
        stream_options: { include_usage: true },
      });
      assert.equal(text(chunks), 'ab');
      assert.ok(chunks.every((c) => c.model === 'svc-pro'));
      assert.equal(chunks[0]?.['obfuscation'], fast ? 'xyz' : undefined);
      assert.deepEqual(chunks[1]?.choices[0]?.['delta'], { reasoning_content: 'think' });
      assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
      assert.equal((chunks[3]?.['usage'] as Record<string, unknown>)['cost'], Number(expectedCost(12, 3)));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(12, 3));
    });

    it('an event the upstream split over several data lines reaches the client as one chunk', async () => {
      const { key, accountId } = await fx.fund(100_000);
      // Compact JSON but for one line break: only that keeps it from going through as it is.
      const first = JSON.stringify({
        id: 'up-2',
        ...base,
        choices: [{ index: 0, delta: { content: 'x' }, finish_reason: null }],
      }).replace(',"created"', ',\n"created"');
      fx.upstream.enqueue({
        kind: 'garbage',
        body:
          first
            .split('\n')
            .map((line) => `data: ${line}\n`)
            .join('') +
          '\n' +
          sse([
            { id: 'up-2', ...base, choices: [{ index: 0, delta: { content: 'y' }, finish_reason: 'stop' }] },
            { id: 'up-2', ...base, choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } },
            '[DONE]',
          ]),
      });
      const { chunks, raw } = await stream(fx, key, { messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(text(chunks), 'xy');
      assert.equal(raw.split('\n\n').filter((f) => f.startsWith('data: {')).length, 2);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(5, 2));
    });

    it('an upstream without usage is charged from svc’s own count, marked estimated', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'four words of answer', usage: 'omit' });
      const { chunks } = await stream(fx, key, {
        messages: [{ role: 'user', content: 'hi' }],
        stream_options: { include_usage: true },
      });
      const usage = chunks[chunks.length - 1]?.['usage'] as Record<string, unknown>;
      assert.equal(usage['estimated'], true);
      const cost = BigInt(usage['cost'] as number);
      assert.ok(cost > 0n);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
    });

    it('an upstream error frame mid-stream ends it with an error frame and costs nothing', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({
        kind: 'error_frame',
        afterPieces: 2,
        error: { message: 'overloaded', type: 'server_error', code: null, param: null },
      });
      const { raw, chunks } = await stream(fx, key, { messages: [{ role: 'user', content: 'hi' }] });
      assert.ok(chunks.some((c) => c.choices.length > 0));
      const error = chunks[chunks.length - 1]?.['error'] as Record<string, unknown> | undefined;
      assert.equal(typeof error?.['message'], 'string');
      assert.ok(!raw.includes('[DONE]'));
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    });

    it('a stream cut before it finished is an upstream failure: nothing charged', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'cut', afterPieces: 2 });
      const { chunks } = await stream(fx, key, { messages: [{ role: 'user', content: 'hi' }] });
      assert.ok(chunks[chunks.length - 1]?.['error'] !== undefined);
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    });

    it('serves n > 1 through the translation on both paths', async () => {
      const { key } = await fx.fund(100_000);
      const { chunks } = await stream(fx, key, { messages: [{ role: 'user', content: 'hi' }], n: 2 });
      assert.ok(chunks.length > 0);
      assert.ok(chunks.every((c) => !c.id.startsWith('chatcmpl-fake')));
      assert.deepEqual(new Set(chunks.flatMap((c) => c.choices.map((ch) => ch['index']))), new Set([0, 1]));
    });

    it('replays an idempotent stream without calling the upstream or charging again', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const body = JSON.stringify({
        model: 'svc-pro',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'once' }],
      });
      const call = async (): Promise<string> =>
        (
          await fetch(`${fx.baseURL}/chat/completions`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${key}`,
              'content-type': 'application/json',
              'idempotency-key': `k-${String(fast)}`,
            },
            body,
          })
        ).text();
      const first = await call();
      const after = (await fx.settled(accountId)).balance;
      const second = await call();
      assert.equal(fx.upstream.requests.length, 1);
      assert.equal((await fx.settled(accountId)).balance, after);
      const frames = (raw: string): string[] => raw.split('\n\n').filter((f) => f.startsWith('data: {"id"'));
      // The same chunks again, but the last, whose usage reports what the replay cost: nothing.
      assert.deepEqual(frames(second).slice(0, -1), frames(first).slice(0, -1));
      assert.match(frames(second).at(-1) ?? '', /"cost":0/);
    });
  });
}

interface Answered {
  readonly status: number;
  readonly raw: string;
  readonly json: Record<string, unknown>;
  readonly headers: Headers;
}

async function complete(
  fx: OpenAiFixture,
  key: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<Answered> {
  const response = await fetch(`${fx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }], ...body }),
  });
  const raw = await response.text();
  return { status: response.status, raw, json: JSON.parse(raw) as Record<string, unknown>, headers: response.headers };
}

/** The usage object svc writes for a completion (adapters/openai/chat-response.ts `usageJson`). */
function svcUsage(
  prompt: number,
  completion: number,
  cost: bigint,
  cached = 0,
  reasoning = 0,
): Record<string, unknown> {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
    completion_tokens_details: { reasoning_tokens: reasoning },
    cost: Number(cost),
  };
}

const message = (choice: Record<string, unknown> | undefined): Record<string, unknown> | undefined =>
  choice?.['message'] as Record<string, unknown> | undefined;

for (const fast of [true, false]) {
  describe(`OpenAI API: chat completions (non-stream) on the ${fast ? 'fast' : 'translated'} path`, function () {
    let fx: OpenAiFixture;
    const previous = process.env['SVC_FAST_PATH'];

    before(async () => {
      // The config decides here, whatever the run's SVC_FAST_PATH says.
      delete process.env['SVC_FAST_PATH'];
      fx = await startOpenAiFixture({ extraConfig: `chat:\n  fast_path: ${fast}\n` });
    });
    after(async () => {
      if (previous === undefined) delete process.env['SVC_FAST_PATH'];
      else process.env['SVC_FAST_PATH'] = previous;
      await fx.close();
    });
    beforeEach(() => fx.upstream.reset());

    async function records(accountId: string): Promise<unknown[]> {
      return fx.svc.store.db
        .selectFrom('usage_records')
        .select(['status', 'cost', 'input_tokens', 'output_tokens', 'error_code'])
        .where('account_id', '=', accountId)
        .execute();
    }

    it('answers with the upstream’s own bytes on the fast path: svc’s model id and usage in them, charged exactly', async () => {
      const { key, accountId } = await fx.fund(100_000);
      // Indented as OpenAI writes it, with a field the translation does not know and usage mid-object.
      const upstream = JSON.stringify(
        {
          id: 'up-nonstream-1',
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'fake-model-1',
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: 'The "model": fake-model-1 says hi',
                refusal: null,
                annotations: [],
              },
              logprobs: null,
              finish_reason: 'stop',
            },
          ],
          usage: {
            prompt_tokens: 40,
            completion_tokens: 4,
            total_tokens: 44,
            prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
          },
          service_tier: 'default',
          system_fingerprint: 'fp_up',
          obfuscation: 'xyz',
        },
        null,
        2,
      );
      fx.upstream.enqueue({ kind: 'garbage', body: upstream });
      const { status, raw, json, headers } = await complete(fx, key, { max_tokens: 100 });
      assert.equal(status, 200);
      assert.match(headers.get('content-type') ?? '', /^application\/json/);
      assertSchema('CreateChatCompletionResponse', json);
      const cost = expectedCost(40, 4);
      assert.equal(json['model'], 'svc-pro');
      assert.deepEqual(json['usage'], svcUsage(40, 4, cost));
      assert.equal(
        message((json['choices'] as Record<string, unknown>[])[0])?.['content'],
        'The "model": fake-model-1 says hi',
      );
      assert.equal(headers.get('x-svc-cost'), String(cost));
      if (fast) {
        // Byte for byte: only the model's value and the usage's are svc's.
        const usageAt = upstream.indexOf('{', upstream.indexOf('"usage": '));
        const usageEnd = upstream.indexOf('}\n  },', usageAt) + 5;
        const expected =
          upstream.slice(0, usageAt).replace('"model": "fake-model-1"', '"model": "svc-pro"') +
          JSON.stringify(svcUsage(40, 4, cost)) +
          upstream.slice(usageEnd);
        assert.equal(raw, expected);
      } else {
        assert.notEqual(json['id'], 'up-nonstream-1');
        assert.equal(json['obfuscation'], undefined);
      }
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
      assert.deepEqual(await records(accountId), [
        { status: 'ok', cost, input_tokens: 40n, output_tokens: 4n, error_code: null },
      ]);
      const sent = fx.upstream.requests[0]?.body;
      assert.equal(sent?.['model'], 'fake-model-1');
      assert.equal(sent?.['max_tokens'], 100);
      assert.equal(sent?.['stream'], undefined);
    });

    it('rewrites the model and keeps the upstream’s id on the fast path; the translation makes its own', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({
        kind: 'text',
        text: 'one two three',
        usage: { prompt_tokens: 12, completion_tokens: 3, cached_tokens: 2 },
      });
      const { raw, json } = await complete(fx, key, {});
      assertSchema('CreateChatCompletionResponse', json);
      assert.ok(!raw.includes('fake-model-1'), 'never the upstream’s model name');
      assert.equal(json['model'], 'svc-pro');
      assert.equal(String(json['id']).startsWith('chatcmpl-fake'), fast);
      const cost = expectedCost(12, 3);
      assert.deepEqual(json['usage'], svcUsage(12, 3, cost, 2));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
    });

    it('an upstream without usage is charged from svc’s own count, marked estimated, on both paths alike', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'four words of answer', usage: 'omit' });
      const { json, headers } = await complete(fx, key, {});
      assertSchema('CreateChatCompletionResponse', json);
      assert.equal(String(json['id']).startsWith('chatcmpl-fake'), fast);
      const usage = json['usage'] as Record<string, unknown>;
      assert.equal(usage['estimated'], true);
      const cost = BigInt(usage['cost'] as number);
      assert.ok(cost > 0n);
      assert.equal(headers.get('x-svc-cost'), String(cost));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
      assert.deepEqual(await records(accountId), [
        {
          status: 'ok',
          cost,
          input_tokens: BigInt(usage['prompt_tokens'] as number),
          output_tokens: BigInt(usage['completion_tokens'] as number),
          error_code: null,
        },
      ]);
    });

    it('normalises what the translation smooths over on both paths (OpenRouter’s `reasoning`, a missing finish reason)', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({
        kind: 'garbage',
        body: JSON.stringify({
          id: 'up-q',
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'fake-model-1',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok', reasoning: 'think' } }],
          usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
        }),
      });
      const { raw, json } = await complete(fx, key, {});
      assertSchema('CreateChatCompletionResponse', json);
      assert.ok(!raw.includes('fake-model-1'));
      const choice = (json['choices'] as Record<string, unknown>[])[0];
      assert.equal(choice?.['finish_reason'], 'stop');
      assert.equal(message(choice)?.['reasoning_content'], 'think');
      assert.equal(message(choice)?.['reasoning'], undefined);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(5, 2));
    });

    it('an upstream error or a body that is no completion fails alike on both paths and costs nothing', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'http_error', status: 500 });
      const failed = await complete(fx, key, {});
      fx.upstream.enqueue({ kind: 'garbage' });
      const garbage = await complete(fx, key, {});
      fx.upstream.enqueue({
        kind: 'garbage',
        body: JSON.stringify({ id: 'x', object: 'chat.completion', choices: [] }),
      });
      const empty = await complete(fx, key, {});
      assert.deepEqual(
        [failed, garbage, empty].map((a) => [a.status, (a.json['error'] as Record<string, unknown>)['code']]),
        [
          [502, 'upstream_error'],
          [502, 'upstream_error'],
          [502, 'upstream_error'],
        ],
      );
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
      const statuses = (await records(accountId)).map((r) => (r as { status: string; cost: bigint }).status);
      assert.deepEqual(statuses, ['error', 'error', 'error']);
    });

    it('replays an idempotent completion without calling the upstream or charging again', async () => {
      const { key, accountId } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'only once', usage: { prompt_tokens: 30, completion_tokens: 3 } });
      const headers = { 'idempotency-key': `nonstream-${String(fast)}` };
      const first = await complete(fx, key, { messages: [{ role: 'user', content: 'once' }] }, headers);
      const after = (await fx.settled(accountId)).balance;
      assert.equal(after, 100_000n - expectedCost(30, 3));
      const second = await complete(fx, key, { messages: [{ role: 'user', content: 'once' }] }, headers);
      assert.equal(fx.upstream.requests.length, 1);
      assert.equal((await fx.settled(accountId)).balance, after);
      assert.equal(second.headers.get('x-svc-cost'), '0');
      // The same answer, byte for byte, but the cost its usage reports: what the replay cost, nothing.
      assert.equal(second.raw, first.raw.replace(`"cost":${expectedCost(30, 3)}`, '"cost":0'));
      assert.equal((second.json['usage'] as Record<string, unknown>)['cost'], 0);
      assert.equal(String(second.json['id']).startsWith('chatcmpl-fake'), fast);
    });

    it('serves n > 1 through the translation on both paths', async () => {
      const { key } = await fx.fund(100_000);
      const { json } = await complete(fx, key, { n: 2 });
      assert.ok(!String(json['id']).startsWith('chatcmpl-fake'));
      assert.deepEqual(
        (json['choices'] as Record<string, unknown>[]).map((c) => c['index']),
        [0, 1],
      );
    });
  });
}
