import assert from 'node:assert/strict';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { llmSample } from '../fakes/sample-replay';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * A CreateResponse (streamed, and once not) to an `openai-responses` upstream on the fast path
 * (core/chat/fast-path.ts `usesResponsesFastPath`, responses/native.ts `streamPassThrough`,
 * `createNative`) and on the native path (events parsed, carried as Structs, written again) side
 * by side, one svc each over one fake upstream (test/fakes/samples/openai-responses, provenance in
 * its SOURCES.md): the same events, money, records, stored responses and failures on both; on the
 * fast path the upstream's texts reach the client byte for byte, svc's id, model and `store` in
 * its `response` objects, the terminal event after the charge with svc's usage and cost. CI runs
 * test/openai again with SVC_FAST_PATH=0; this file sets each svc's path itself, and checks that
 * variable on its own.
 */

type Obj = Record<string, unknown>;

interface Streamed {
  readonly status: number;
  /** The body without svc's closing cost comment. */
  readonly raw: string;
  readonly cost: bigint | undefined;
  readonly events: { event: string; data: Obj }[];
}

function eventsOf(raw: string): Streamed['events'] {
  const out: Streamed['events'] = [];
  for (const frame of raw.split('\n\n')) {
    const lines = frame.split('\n').filter((line) => line !== '');
    const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5));
    if (data.length === 0) continue;
    const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? '';
    out.push({ event, data: JSON.parse(data.join('\n')) as Obj });
  }
  return out;
}

/** The upstream's event texts (its data lines) of an SSE text, `[DONE]` left out. */
function upstreamTexts(sse: string): string[] {
  return sse
    .split('\n\n')
    .map((frame) => /^data: (.*)$/m.exec(frame)?.[1])
    .filter((d): d is string => d !== undefined && d !== '[DONE]');
}

const UPSTREAM_MODEL = 'gpt-5.1-codex-max';
const MODEL = 'svc-codex';
const RESPONSE_EVENTS = new Set([
  'response.created',
  'response.in_progress',
  'response.completed',
  'response.incomplete',
]);

/** An event with the fields svc owns taken out (its id, its cost), for comparing the two paths. */
function comparable(e: Obj): Obj {
  const response = e['response'] as Obj | undefined;
  if (response === undefined) return e;
  const { id: _id, usage, ...rest } = response;
  const { cost: _cost, ...u } = (usage ?? {}) as Obj;
  return { ...e, response: { ...rest, usage: usage === null ? null : u } };
}

// A stream of the test's own making, as a Responses upstream could write it: spaces after colons,
// an event type and fields svc does not know, `store` written by the upstream.
const CREATED = `{"type": "response.created", "sequence_number": 0, "response": {"id": "resp_up_1", "object": "response", "created_at": 1741294021, "status": "in_progress", "model": "${UPSTREAM_MODEL}", "output": [], "store": false, "usage": null, "future_field": {"x": 1.50}}}`;
const HAND_WRITTEN = [
  CREATED,
  `{"type": "response.in_progress", "sequence_number": 1, "response": {"id": "resp_up_1", "object": "response", "created_at": 1741294021, "status": "in_progress", "model": "${UPSTREAM_MODEL}", "output": [], "store": false, "usage": null}}`,
  '{"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}',
  '{"type": "response.future_progress", "sequence_number": 3, "detail": {"kept": true, "ratio": 0.50, "unicode": "\\u00e9"}}',
  '{"type": "response.output_text.delta", "sequence_number": 4, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hello \\"you\\"", "obfuscation": "abc", "logprobs": []}',
  '{"type": "response.output_text.done", "sequence_number": 5, "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": "Hello \\"you\\""}',
];
const completed = (usage: Obj | null): string =>
  JSON.stringify({
    type: 'response.completed',
    sequence_number: 6,
    response: {
      id: 'resp_up_1',
      object: 'response',
      created_at: 1741294021,
      status: 'completed',
      model: UPSTREAM_MODEL,
      output: [
        {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Hello "you"', annotations: [] }],
        },
      ],
      store: false,
      ...(usage === null ? {} : { usage }),
    },
  });
const sseOf = (texts: readonly string[]): string =>
  texts.map((t) => `event: ${(JSON.parse(t) as Obj)['type'] as string}\ndata: ${t}\n\n`).join('') + 'data: [DONE]\n\n';

describe('OpenAI API: Responses to an openai-responses upstream, fast path and native path side by side', function () {
  let up: FakeResponsesUpstream;
  const fx = new Map<boolean, OpenAiFixture>();
  const previous = process.env['SVC_FAST_PATH'];

  const model = `
  ${MODEL}:
    provider: openai-responses
    base_url: UPSTREAM
    api_key: ${FAKE_RESPONSES_KEY}
    upstream_model: ${UPSTREAM_MODEL}
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
`;

  before(async () => {
    // The config decides here, whatever the run's SVC_FAST_PATH says.
    delete process.env['SVC_FAST_PATH'];
    up = await startFakeResponsesUpstream();
    for (const fast of [true, false])
      fx.set(
        fast,
        await startOpenAiFixture({
          extraConfig: `chat:\n  fast_path: ${fast}\n`,
          extraModels: () => model.replace('UPSTREAM', up.baseUrl),
        }),
      );
  });
  after(async () => {
    if (previous === undefined) delete process.env['SVC_FAST_PATH'];
    else process.env['SVC_FAST_PATH'] = previous;
    for (const f of fx.values()) await f.close();
    await up?.close();
  });

  const on = (fast: boolean): OpenAiFixture => fx.get(fast) as OpenAiFixture;

  async function stream(f: OpenAiFixture, key: string, body: Obj = {}, idempotencyKey?: string): Promise<Streamed> {
    const response = await fetch(`${f.baseURL}/responses`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
      },
      body: JSON.stringify({ model: MODEL, input: 'hi', stream: true, ...body }),
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

  const records = (f: OpenAiFixture, accountId: string) =>
    f.svc.store.db
      .selectFrom('usage_records')
      .select(['status', 'cost', 'input_tokens', 'output_tokens'])
      .where('account_id', '=', accountId)
      .execute();

  /** The same call on both paths: each side's stream, account and records. */
  async function both(queue: () => void, body: Obj = {}) {
    const out = new Map<boolean, Streamed & { accountId: string; key: string }>();
    for (const fast of [true, false]) {
      const { key, accountId } = await on(fast).fund(100_000);
      queue();
      out.set(fast, { ...(await stream(on(fast), key, body)), accountId, key });
    }
    return {
      fast: out.get(true) as Streamed & { accountId: string; key: string },
      native: out.get(false) as Streamed & { accountId: string; key: string },
    };
  }

  const samples: [string, number, number][] = [
    ['openai-responses/stream-text.sse', 10, 2],
    ['openai-responses/stream-reasoning-summary.sse', 2048, 350],
    ['openai-responses/stream-function-call.sse', 291, 23],
  ];
  for (const [sample, input, output] of samples)
    it(`${sample}: the same events and money on both paths; on the fast path each event without a response object byte for byte`, async () => {
      const { fast, native } = await both(() => up.enqueue({ sample }));
      const cost = expectedCost(input, output);
      for (const [path, s] of [
        ['fast', fast],
        ['native', native],
      ] as const) {
        assert.equal(s.status, 200, path);
        assert.equal(s.cost, cost, path);
        const terminal = s.events.at(-1)?.data['response'] as Obj;
        assert.equal(s.events.at(-1)?.event, 'response.completed', path);
        assert.equal((terminal['usage'] as Obj)['cost'], Number(cost), path);
        for (const e of s.events.filter((x) => RESPONSE_EVENTS.has(x.event))) {
          const response = e.data['response'] as Obj;
          assert.equal(response['id'], terminal['id'], `${path}: one svc id`);
          assert.match(String(response['id']), /^resp_/);
          assert.notEqual(response['id'], 'resp_test_1');
          assert.equal(response['model'], MODEL, path);
          assert.equal(response['store'], true, path);
        }
        assert.ok(!s.raw.includes(UPSTREAM_MODEL), path);
        assert.equal((await on(path === 'fast').settled(s.accountId)).balance, 100_000n - cost, path);
        assert.deepEqual(
          await records(on(path === 'fast'), s.accountId),
          [{ status: 'ok', cost, input_tokens: BigInt(input), output_tokens: BigInt(output) }],
          path,
        );
      }
      assert.deepEqual(
        fast.events.map((e) => comparable(e.data)),
        native.events.map((e) => comparable(e.data)),
      );
      // The events without a `response` object are the upstream's own text, on the fast path.
      const texts = upstreamTexts(llmSample(sample)).filter((t) => !t.includes('"response":{'));
      const written = fast.raw
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6));
      for (const t of texts) assert.ok(written.includes(t), `byte for byte: ${t.slice(0, 80)}`);
    });

  it('the upstream’s bytes as it wrote them (spacing, escapes, numbers, unknown event types and fields), only svc’s fields edited in place', async () => {
    const sse = sseOf([...HAND_WRITTEN, completed({ input_tokens: 12, output_tokens: 4, total_tokens: 16 })]);
    const { fast, native } = await both(() => up.enqueue({ garbage: sse, contentType: 'text/event-stream' }));
    for (const [path, s] of [
      ['fast', fast],
      ['native', native],
    ] as const) {
      assert.equal(s.cost, expectedCost(12, 4), path);
      assert.deepEqual(
        s.events.map((e) => e.event),
        [
          'response.created',
          'response.in_progress',
          'response.output_item.added',
          'response.future_progress',
          'response.output_text.delta',
          'response.output_text.done',
          'response.completed',
        ],
        path,
      );
      assert.deepEqual(s.events[3]?.data, JSON.parse(HAND_WRITTEN[3] as string), path);
      assert.equal((await on(path === 'fast').settled(s.accountId)).balance, 100_000n - expectedCost(12, 4), path);
    }
    const id = (fast.events[0]?.data['response'] as Obj)['id'] as string;
    const edited = (t: string): string =>
      t
        .replace('"id": "resp_up_1"', `"id": "${id}"`)
        .replace(`"model": "${UPSTREAM_MODEL}"`, `"model": "${MODEL}"`)
        .replace('"store": false', '"store": true');
    const expected = HAND_WRITTEN.map(
      (t, i) => `event: ${fast.events[i]?.event ?? ''}\ndata: ${i < 2 ? edited(t) : t}\n\n`,
    ).join('');
    // Every event as the upstream wrote it, svc's fields edited in place: the terminal event's
    // usage gets its cost, after the charge.
    const cost = String(expectedCost(12, 4));
    const terminal = completed({ input_tokens: 12, output_tokens: 4, total_tokens: 16 })
      .replace('"id":"resp_up_1"', `"id":"${id}"`)
      .replace(`"model":"${UPSTREAM_MODEL}"`, `"model":"${MODEL}"`)
      .replace('"store":false', '"store":true')
      .replace('"total_tokens":16}', `"total_tokens":16,"cost":${cost}}`);
    assert.equal(
      fast.raw,
      `${expected}event: response.completed\ndata: ${terminal}\n\n`,
      'byte for byte on the fast path',
    );
    // The native path writes every event again: the same meaning, not the same bytes.
    assert.notEqual(native.raw.slice(0, expected.length), expected);
    assert.deepEqual(
      fast.events.map((e) => comparable(e.data)),
      native.events.map((e) => comparable(e.data)),
    );
  });

  it('a response object whose key the upstream escaped (\\u0072esponse) still gets svc’s id and model', async () => {
    // Escaped wherever the text would name it: the key and `"object": "response"`.
    const escaped = (HAND_WRITTEN[1] as string).replaceAll('"response"', '"\\u0072esponse"');
    assert.ok(!escaped.includes('"response"'));
    assert.notEqual(escaped, HAND_WRITTEN[1]);
    const sse = sseOf([
      HAND_WRITTEN[0] as string,
      escaped,
      ...HAND_WRITTEN.slice(2),
      completed({ input_tokens: 12, output_tokens: 4, total_tokens: 16 }),
    ]);
    const { fast, native } = await both(() => up.enqueue({ garbage: sse, contentType: 'text/event-stream' }));
    for (const [path, s] of [
      ['fast', fast],
      ['native', native],
    ] as const) {
      const ids = s.events
        .filter((e) => e.data['response'] !== undefined)
        .map((e) => (e.data['response'] as Obj)['id']);
      assert.equal(ids.length, 3, path);
      assert.equal(new Set(ids).size, 1, `${path}: one id throughout: ${ids.join(', ')}`);
      assert.notEqual(ids[0], 'resp_up_1', path);
      assert.equal((s.events[1]?.data['response'] as Obj)['model'], MODEL, path);
    }
  });

  it('an upstream without usage: the terminal event carries svc’s own count, marked estimated, and exactly that is charged once', async () => {
    const sse = sseOf([...HAND_WRITTEN, completed(null)]);
    const { fast, native } = await both(() => up.enqueue({ garbage: sse, contentType: 'text/event-stream' }));
    for (const [path, s] of [
      ['fast', fast],
      ['native', native],
    ] as const) {
      const usage = (s.events.at(-1)?.data['response'] as Obj)['usage'] as Obj;
      assert.equal(usage['estimated'], true, path);
      const cost = expectedCost(usage['input_tokens'] as number, usage['output_tokens'] as number);
      assert.ok((usage['output_tokens'] as number) > 0, path);
      assert.equal(usage['cost'], Number(cost), path);
      assert.equal(s.cost, cost, path);
      assert.equal((await on(path === 'fast').settled(s.accountId)).balance, 100_000n - cost, path);
      assert.equal((await records(on(path === 'fast'), s.accountId)).length, 1, path);
    }
    assert.deepEqual(
      (fast.events.at(-1)?.data['response'] as Obj)['usage'],
      (native.events.at(-1)?.data['response'] as Obj)['usage'],
    );
  });

  it('an upstream failure mid-stream (response.failed, an error event, a cut) ends in an error event and costs nothing', async () => {
    for (const reply of [
      { sample: 'openai-responses/stream-failed.sse' },
      { sample: 'openai-responses/stream-error-rate-limit.sse' },
      { cut: 'openai-responses/stream-text.sse', afterEvents: 5 },
      { cut: 'openai-responses/stream-text.sse', afterEvents: 7, cleanEnd: true },
    ]) {
      const { fast, native } = await both(() => up.enqueue(reply));
      for (const [path, s] of [
        ['fast', fast],
        ['native', native],
      ] as const) {
        const what = `${path} ${JSON.stringify(reply)}`;
        assert.equal(s.events.at(-1)?.event, 'error', what);
        assert.ok(!s.events.some((e) => e.event === 'response.completed'), what);
        assert.equal(s.cost, undefined, what);
        assert.deepEqual(await on(path === 'fast').settled(s.accountId), { balance: 100_000n, held: 0n }, what);
        assert.equal((await records(on(path === 'fast'), s.accountId))[0]?.cost, 0n, what);
        // The error event follows the last event the client got.
        const sequences = s.events.map((e) => e.data['sequence_number']);
        assert.equal(sequences.at(-1), ((sequences.at(-2) as number | undefined) ?? -1) + 1, what);
      }
      // The same error; the native path holds back events that carry no output until the next
      // one that does, so its error may follow fewer events.
      const { sequence_number: _a, ...fastError } = fast.events.at(-1)?.data ?? {};
      const { sequence_number: _b, ...nativeError } = native.events.at(-1)?.data ?? {};
      assert.deepEqual(fastError, nativeError);
    }
  });

  it('store: true keeps the response under svc’s id on both paths, and previous_response_id continues it', async () => {
    const { fast, native } = await both(() => up.enqueue({ sample: 'openai-responses/stream-text.sse' }));
    for (const [path, s] of [
      ['fast', fast],
      ['native', native],
    ] as const) {
      const f = on(path === 'fast');
      const last = s.events.at(-1)?.data['response'] as Obj;
      const { output_text: _text, ...stored } = (await f
        .client(s.key)
        .responses.retrieve(last['id'] as string)) as unknown as Obj;
      assert.deepEqual(stored, last, path);
      up.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      const next = await f
        .client(s.key)
        .responses.create({ model: MODEL, input: 'and then?', previous_response_id: last['id'] as string });
      assert.equal(next.model, MODEL, path);
      // The stored conversation went upstream: the first turn's input and its answer.
      const sent = JSON.stringify(up.requests.at(-1)?.body['input']);
      assert.ok(sent.includes('Hello world') && sent.includes('and then?'), path);
    }
    // store: false keeps nothing.
    const { fast: unstored } = await both(() => up.enqueue({ sample: 'openai-responses/stream-text.sse' }), {
      store: false,
    });
    const id = (unstored.events.at(-1)?.data['response'] as Obj)['id'] as string;
    assert.equal((unstored.events[0]?.data['response'] as Obj)['store'], false);
    await assert.rejects(
      on(true).client(unstored.key).responses.retrieve(id),
      (e: unknown) => (e as { status?: number }).status === 404,
    );
  });

  it('replays an idempotent stream event for event at cost 0, without the upstream or a second charge', async () => {
    for (const fast of [true, false]) {
      const f = on(fast);
      const { key, accountId } = await f.fund(100_000);
      up.enqueue({ sample: 'openai-responses/stream-text.sse' });
      const requests = up.requests.length;
      const first = await stream(f, key, {}, `responses-fast-${String(fast)}`);
      const after = (await f.settled(accountId)).balance;
      assert.equal(after, 100_000n - expectedCost(10, 2));
      const second = await stream(f, key, {}, `responses-fast-${String(fast)}`);
      assert.equal(up.requests.length, requests + 1);
      assert.equal((await f.settled(accountId)).balance, after);
      assert.equal(second.cost, 0n);
      assert.deepEqual(second.events.slice(0, -1), first.events.slice(0, -1));
      const usage = (second.events.at(-1)?.data['response'] as Obj)['usage'] as Obj;
      assert.equal(usage['cost'], 0);
      assert.equal((await records(f, accountId)).length, 1);
    }
  });

  it('not streamed: the upstream’s Response text as it wrote it on the fast path, svc’s members edited in; the same Response, money, store and replay on both paths', async () => {
    const upstreamText = `{"id": "resp_up_2", "object": "response", "created_at": 1741294021, "status": "completed", "model": "${UPSTREAM_MODEL}", "output": [{"id": "msg_2", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Hi \\u00e9", "annotations": []}]}], "store": false, "future_field": {"ratio": 0.50}, "usage": {"input_tokens": 12, "output_tokens": 4, "total_tokens": 16}}`;
    const cost = expectedCost(12, 4);
    const out = new Map<boolean, { text: string; json: Obj; key: string; accountId: string }>();
    for (const fast of [true, false]) {
      const f = on(fast);
      const { key, accountId } = await f.fund(100_000);
      up.enqueue({ garbage: upstreamText });
      const post = () =>
        fetch(`${f.baseURL}/responses`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'idempotency-key': `ns-${String(fast)}`,
          },
          body: JSON.stringify({ model: MODEL, input: 'hi' }),
        });
      const response = await post();
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('x-svc-cost'), String(cost));
      const text = await response.text();
      const json = JSON.parse(text) as Obj;
      out.set(fast, { text, json, key, accountId });
      assert.equal(json['model'], MODEL);
      assert.equal(json['store'], true);
      assert.equal((json['usage'] as Obj)['cost'], Number(cost));
      assert.equal((await f.settled(accountId)).balance, 100_000n - cost);
      const { output_text: _t, ...stored } = (await f
        .client(key)
        .responses.retrieve(json['id'] as string)) as unknown as Obj;
      assert.deepEqual(stored, json);
      // Replayed: the same Response at cost 0, nothing charged again.
      const replayed = JSON.parse(await (await post()).text()) as Obj;
      assert.deepEqual(replayed, { ...json, usage: { ...(json['usage'] as Obj), cost: 0 } });
      assert.equal((await f.settled(accountId)).balance, 100_000n - cost);
      assert.equal((await records(f, accountId)).length, 1);
    }
    const fast = out.get(true) as { text: string; json: Obj };
    const native = out.get(false) as { text: string; json: Obj };
    const id = fast.json['id'] as string;
    assert.equal(
      fast.text,
      upstreamText
        .replace('"id": "resp_up_2"', `"id": "${id}"`)
        .replace(`"model": "${UPSTREAM_MODEL}"`, `"model": "${MODEL}"`)
        .replace('"store": false', '"store": true')
        .replace('"total_tokens": 16}', `"total_tokens": 16,"cost":${cost}}`),
      'byte for byte on the fast path',
    );
    assert.notEqual(native.text.replace(native.json['id'] as string, id), fast.text);
    assert.deepEqual({ ...native.json, id }, fast.json);
  });

  it('the official client reads the passed-through stream: text, svc’s id and model, the usage with its cost', async () => {
    const f = on(true);
    const { key } = await f.fund(100_000);
    up.enqueue({ sample: 'openai-responses/stream-reasoning-summary.sse' });
    const s = f.client(key).responses.stream({ model: MODEL, input: 'Hello!' });
    let text = '';
    for await (const e of s) if (e.type === 'response.output_text.delta') text += e.delta;
    const final = await s.finalResponse();
    assert.equal(text, 'Hello! How can I assist you today?');
    assert.equal(final.output_text, text);
    assert.equal(final.model, MODEL);
    assert.equal(final.usage?.input_tokens, 2048);
    assert.equal((final.usage as unknown as Obj)['cost'], Number(expectedCost(2048, 350)));
  });
});

describe('OpenAI API: SVC_FAST_PATH=0 turns the Responses fast path off', function () {
  const previous = process.env['SVC_FAST_PATH'];
  let up: FakeResponsesUpstream;
  let f: OpenAiFixture;
  before(async () => {
    process.env['SVC_FAST_PATH'] = '0';
    up = await startFakeResponsesUpstream();
    f = await startOpenAiFixture({
      extraConfig: 'chat:\n  fast_path: true\n',
      extraModels: () => `
  ${MODEL}:
    provider: openai-responses
    base_url: ${up.baseUrl}
    api_key: ${FAKE_RESPONSES_KEY}
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
    await f?.close();
    await up?.close();
  });

  it('the events are written again (native path), whatever the config says', async () => {
    const { key } = await f.fund(100_000);
    up.enqueue({
      garbage: sseOf([...HAND_WRITTEN, completed({ input_tokens: 1, output_tokens: 1 })]),
      contentType: 'text/event-stream',
    });
    const response = await fetch(`${f.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: 'hi', stream: true }),
    });
    const raw = await response.text();
    assert.ok(raw.includes('response.future_progress'));
    assert.ok(!raw.includes(HAND_WRITTEN[3] as string), 'not the upstream’s bytes');
  });
});
