import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { llmSample } from '../fakes/sample-replay';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M } from '../openai/fixture';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

/*
 * The Anthropic Messages stream to an `anthropic` upstream on the fast path (core/chat/fast-path.ts)
 * and on the native path (events carried as chunks' native events) side by side: the same events,
 * text, usage, money and records on both; on the fast path the upstream's events reach the client
 * as the upstream wrote them (byte for byte: its spacing, trailing spaces, key order), svc's model
 * id in `message_start` in place of the upstream's. The fakes replay recorded Messages streams
 * (test/fakes/samples/anthropic, provenance in its SOURCES.md). CI runs test/anthropic again with
 * SVC_FAST_PATH=0; this file sets the path itself.
 */

interface Streamed {
  readonly status: number;
  /** The body without svc's closing cost comment. */
  readonly raw: string;
  readonly cost: bigint | undefined;
  readonly events: { event: string; data: Record<string, unknown> }[];
}

/** An SSE text's events as a client reads them: the name and the data lines joined. */
function eventsOf(raw: string): Streamed['events'] {
  const out: Streamed['events'] = [];
  for (const frame of raw.split('\n\n')) {
    const lines = frame.split('\n').filter((line) => line !== '');
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5));
    if (data.length === 0) continue;
    const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? '';
    out.push({ event, data: JSON.parse(data.join('\n')) as Record<string, unknown> });
  }
  return out;
}

/** The upstream model svc's config names (the samples' own may differ: svc's replaces either). */
const UPSTREAM_MODEL = 'claude-opus-4-8';

/** A recorded sample as the client should see it: svc's model id in `message_start`. */
const withSvcModel = (text: string): string => text.replace(/"model":"[^"]*"/, '"model":"svc-claude"');

/** An SSE answer of the test's own making, framed as Anthropic frames it. */
function sse(events: readonly Record<string, unknown>[]): string {
  return events.map((e) => `event: ${String(e['type'])}\ndata: ${JSON.stringify(e)}\n\n`).join('');
}

const start = (usage?: Record<string, unknown>): Record<string, unknown> => ({
  type: 'message_start',
  message: {
    id: 'msg_fast_01',
    type: 'message',
    role: 'assistant',
    content: [],
    model: UPSTREAM_MODEL,
    stop_reason: null,
    stop_sequence: null,
    ...(usage === undefined ? {} : { usage }),
  },
});
const delta = (text: string): Record<string, unknown> => ({
  type: 'content_block_delta',
  index: 0,
  delta: { type: 'text_delta', text },
});

for (const fast of [true, false]) {
  describe(`Anthropic API: Messages streams to an anthropic upstream on the ${fast ? 'fast' : 'native'} path`, function () {
    let up: FakeAnthropicUpstream;
    let fx: AnthropicFixture;
    const previous = process.env['SVC_FAST_PATH'];

    before(async () => {
      // The config decides here, whatever the run's SVC_FAST_PATH says.
      delete process.env['SVC_FAST_PATH'];
      up = await startFakeAnthropicUpstream();
      fx = await startAnthropicFixture({
        extraConfig: `chat:\n  fast_path: ${fast}\n`,
        extraModels: () => `
  svc-claude:
    provider: anthropic
    base_url: ${up.baseUrl}
    api_key: ${FAKE_ANTHROPIC_KEY}
    upstream_model: ${UPSTREAM_MODEL}
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
`,
      });
    });
    after(async () => {
      if (previous === undefined) delete process.env['SVC_FAST_PATH'];
      else process.env['SVC_FAST_PATH'] = previous;
      await fx?.close();
      await up?.close();
    });

    async function stream(key: string, body: Record<string, unknown> = {}, idempotencyKey?: string): Promise<Streamed> {
      const response = await fetch(`${fx.anthropicURL}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': key,
          'anthropic-version': '2023-06-01',
          ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
        },
        body: JSON.stringify({
          model: 'svc-claude',
          max_tokens: 1000,
          stream: true,
          messages: [{ role: 'user', content: 'hi' }],
          ...body,
        }),
      });
      const text = await response.text();
      const m = /: svc-cost (\d+) balance \d+\n\n$/.exec(text);
      const raw = m === null ? text : text.slice(0, m.index);
      return {
        status: response.status,
        raw,
        cost: m?.[1] === undefined ? undefined : BigInt(m[1]),
        events: eventsOf(raw),
      };
    }

    const records = (accountId: string) =>
      fx.svc.store.db
        .selectFrom('usage_records')
        .select(['status', 'cost', 'input_tokens', 'output_tokens'])
        .where('account_id', '=', accountId)
        .execute();

    // Each recorded stream, with the tokens it is billed for: every input token (cache reads and
    // writes included) and the output, as message_delta leaves them.
    const samples: [string, number, number][] = [
      ['anthropic/stream-basic.sse', 11, 6],
      ['anthropic/stream-thinking-refusal.sse', 28, 106],
      ['anthropic/stream-tool-use.sse', 377, 65],
      ['anthropic/stream-cache-usage.sse', 42 + 8 + 7, 99],
    ];
    for (const [sample, input, output] of samples)
      it(`${sample}: every event as the upstream sent it, svc's model id, the upstream usage charged once`, async () => {
        const { key, accountId } = await fx.fund(100_000);
        up.enqueue({ sample });
        const { status, raw, cost, events } = await stream(key);
        assert.equal(status, 200);
        const expected = withSvcModel(llmSample(sample));
        // The fast path writes the upstream's bytes; the native path writes its events again, and
        // `{"type": "ping"}` (as Anthropic writes it, and three of these samples) loses its space.
        if (fast) assert.equal(raw, expected, 'byte for byte');
        if (expected.includes('{"type": "ping"}'))
          assert.equal(raw.includes('data: {"type": "ping"}\n'), fast, 'a ping as written on the fast path only');
        assert.deepEqual(events, eventsOf(expected));
        assert.ok(!raw.includes(UPSTREAM_MODEL) && raw.includes('"model":"svc-claude"'));
        assert.equal(cost, expectedCost(input, output));
        assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(input, output));
        assert.deepEqual(await records(accountId), [
          {
            status: 'ok',
            cost: expectedCost(input, output),
            input_tokens: BigInt(input),
            output_tokens: BigInt(output),
          },
        ]);
        assert.equal(up.requests.at(-1)?.body['model'], UPSTREAM_MODEL);
        assert.equal(up.requests.at(-1)?.body['stream'], true);
      });

    it('the official client reads the passed-through stream: text, svc’s model, the usage', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({ sample: 'anthropic/stream-basic.sse' });
      const client: Anthropic = fx.anthropic(key);
      const message = await client.messages
        .stream({ model: 'svc-claude', max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] })
        .finalMessage();
      assert.equal(message.model, 'svc-claude');
      assert.deepEqual(
        message.content.map((b) => (b.type === 'text' ? b.text : b.type)),
        ['Hello there!'],
      );
      assert.equal(message.usage.input_tokens, 11);
      assert.equal(message.usage.output_tokens, 6);
      assert.equal(up.requests.at(-1)?.body['max_tokens'], 50);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(11, 6));
    });

    it('an event type svc does not know reaches the client in its place; one split over data lines arrives whole', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const future = { type: 'future_event', detail: { kept: true } };
      const split = JSON.stringify(delta(' b')).replace(',"delta"', ',\n"delta"');
      up.enqueue({
        garbage:
          sse([
            start({ input_tokens: 9, output_tokens: 1 }),
            { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
            delta('a'),
            future,
          ]) +
          `event: content_block_delta\n${split
            .split('\n')
            .map((line) => `data: ${line}\n`)
            .join('')}\n` +
          sse([
            { type: 'content_block_stop', index: 0 },
            {
              type: 'message_delta',
              delta: { stop_reason: 'end_turn', stop_sequence: null },
              usage: { output_tokens: 3 },
            },
            { type: 'message_stop' },
          ]),
        contentType: 'text/event-stream',
      });
      const { events, raw } = await stream(key);
      assert.deepEqual(
        events.map((e) => e.event),
        [
          'message_start',
          'content_block_start',
          'content_block_delta',
          'future_event',
          'content_block_delta',
          'content_block_stop',
          'message_delta',
          'message_stop',
        ],
      );
      assert.deepEqual(events[3]?.data, future);
      assert.deepEqual(events[4]?.data, delta(' b'));
      assert.ok(raw.split('\n').every((line) => line === '' || /^(event|data): /.test(line)));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(9, 3));
    });

    it('an upstream without usage: message_delta carries svc’s own count, marked estimated, and exactly that is charged', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({
        garbage: sse([
          start(),
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
          delta('four words of answer'),
          { type: 'content_block_stop', index: 0 },
          { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null } },
          { type: 'message_stop' },
        ]),
        contentType: 'text/event-stream',
      });
      const { events, cost } = await stream(key);
      const usage = events.find((e) => e.event === 'message_delta')?.data['usage'] as Record<string, number | boolean>;
      assert.equal(usage['estimated'], true);
      const input = usage['input_tokens'] as number;
      const output = usage['output_tokens'] as number;
      assert.ok(input > 0 && output > 0);
      assert.equal(cost, expectedCost(input, output));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(input, output));
      assert.deepEqual(await records(accountId), [
        { status: 'ok', cost: expectedCost(input, output), input_tokens: BigInt(input), output_tokens: BigInt(output) },
      ]);
    });

    it('an upstream error event mid-stream ends the stream with an error event and costs nothing', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({ sample: 'anthropic/stream-error-overloaded.sse' });
      const { events, cost } = await stream(key);
      assert.equal(events[0]?.event, 'message_start');
      assert.equal(events.at(-1)?.event, 'error');
      assert.ok(!events.some((e) => e.event === 'message_stop'));
      assert.equal(cost, undefined);
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
      assert.equal((await records(accountId))[0]?.cost, 0n);
    });

    it('a stream the upstream cuts before it finished is an upstream failure: an error event, nothing charged', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({ cut: 'anthropic/stream-basic.sse', afterEvents: 5 });
      const { events } = await stream(key);
      assert.ok(events.some((e) => e.event === 'content_block_delta'));
      assert.equal(events.at(-1)?.event, 'error');
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
      up.enqueue({ cut: 'anthropic/stream-basic.sse', afterEvents: 7, cleanEnd: true });
      assert.equal((await stream(key)).events.at(-1)?.event, 'error');
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    });

    it('the official client sees an upstream failure mid-stream as an error', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({ sample: 'anthropic/stream-error-overloaded.sse' });
      await assert.rejects(
        fx
          .anthropic(key)
          .messages.stream({ model: 'svc-claude', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
          .finalMessage(),
        (e: unknown) => e instanceof Anthropic.APIError,
      );
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    });

    it('replays an idempotent stream event for event, without the upstream or a second charge', async () => {
      const { key, accountId } = await fx.fund(100_000);
      up.enqueue({ sample: 'anthropic/stream-basic.sse' });
      const requests = up.requests.length;
      const first = await stream(key, {}, `anthropic-fast-${String(fast)}`);
      const after = (await fx.settled(accountId)).balance;
      assert.equal(after, 100_000n - expectedCost(11, 6));
      const second = await stream(key, {}, `anthropic-fast-${String(fast)}`);
      assert.equal(up.requests.length, requests + 1);
      assert.equal((await fx.settled(accountId)).balance, after);
      assert.equal(second.raw, first.raw);
      assert.equal(second.cost, 0n);
    });
  });
}
