import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { WebSocket } from 'ws';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { llmSample } from '../fakes/sample-replay';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * Native compaction (SPEC §7d): over an openai-responses upstream configured with
 * `compaction: native`, a final compaction_trigger and POST /responses/compact go to the upstream
 * as they are (the fake speaks the documented wire: a `compaction` item with the upstream's
 * `encrypted_content`, usage), billed once from its usage. svc wraps the upstream's item in its
 * own seal (bound to the account), unwraps it for a later request to such an upstream, and
 * refuses it, naming the item, anywhere else. Without the switch svc synthesises compaction.
 */

type Obj = Record<string, unknown>;

async function post(baseURL: string, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

function frames(text: string): Obj[] {
  return text
    .split('\n\n')
    .filter((b) => b.includes('data: '))
    .map((b) => JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? '{}') as Obj);
}

const history = [
  { role: 'user', content: 'Refactor the parser in src/parse.ts' },
  { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"cmd":"cat src/parse.ts"}' },
  { type: 'function_call_output', call_id: 'call_1', output: 'export function parse() {}' },
  { role: 'assistant', content: 'I read the file.' },
];
const shell = {
  type: 'function',
  name: 'shell',
  parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
};

// The upstream's own item and usage, as the samples hold them.
const upstreamItem = (JSON.parse(llmSample('openai-responses/response-compaction.json')) as { output: Obj[] })
  .output[0] as Obj;
const compactAnswer = JSON.parse(llmSample('openai-responses/compact.json')) as { output: Obj[] };
const TRIGGER_PRICE = expectedCost(2048, 312);
const COMPACT_PRICE = expectedCost(139, 438);

describe('OpenAI API: native compaction over an openai-responses upstream (compaction: native)', function () {
  let up: FakeResponsesUpstream;
  let fx: OpenAiFixture;

  const model = (id: string, extra: string): string => `
  ${id}:
    provider: openai-responses
    base_url: ${up.baseUrl}
    api_key: ${FAKE_RESPONSES_KEY}
    upstream_model: gpt-5.1-codex-max
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
${extra}`;

  // Two upstreams (priority 1, then 2) on the same fake, each with its own compaction switch.
  const routed = (id: string, first: string, second: string): string => `
  ${id}:
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
    upstreams:
      - { provider: openai-responses, base_url: ${up.baseUrl}, api_key: ${FAKE_RESPONSES_KEY}, upstream_model: gpt-5.1-codex-max, priority: 1, ${first} }
      - { provider: openai-responses, base_url: ${up.baseUrl}, api_key: ${FAKE_RESPONSES_KEY}, upstream_model: gpt-5.1-codex-max, priority: 2, ${second} }
`;

  before(async () => {
    up = await startFakeResponsesUpstream();
    fx = await startOpenAiFixture({
      extraModels: () =>
        model('svc-codex', '    compaction: native\n') +
        model('svc-codex-plain', '') +
        routed('svc-codex-pair', 'compaction: native', 'compaction: native') +
        routed('svc-codex-mixed', 'compaction: native', 'compaction: svc'),
    });
  });
  after(async () => {
    await fx?.close();
    await up?.close();
  });
  beforeEach(() => {
    up.requests.length = 0;
    fx.upstream.reset();
  });

  /** A's compaction item made by the upstream (non-streamed trigger), as svc returns it. */
  async function nativeItem(key: string): Promise<Obj> {
    const response = (await fx.client(key).responses.create({
      model: 'svc-codex',
      input: [...history, { type: 'compaction_trigger' }] as OpenAI.Responses.ResponseInput,
      tools: [shell] as OpenAI.Responses.Tool[],
      store: false,
    })) as unknown as Obj;
    const output = response['output'] as Obj[];
    assert.equal(output.length, 1);
    return output[0] as Obj;
  }

  it('passes a streamed compaction_trigger to the upstream as it is: exactly one compaction item, sealed by svc, charged once from its usage', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const response = await post(fx.baseURL, '/responses', key, {
      model: 'svc-codex',
      instructions: 'You are Codex.',
      input: [...history, { type: 'compaction_trigger' }],
      tools: [shell],
      store: false,
      stream: true,
    });
    assert.equal(response.status, 200);
    const events = frames(await response.text());
    // The upstream saw the trigger last, with its own model and store: false.
    assert.equal(up.requests.length, 1);
    const sent = up.requests[0];
    assert.equal(sent?.path, '/v1/responses');
    assert.equal(sent?.body['model'], 'gpt-5.1-codex-max');
    assert.equal(sent?.body['store'], false);
    assert.equal(sent?.body['instructions'], 'You are Codex.');
    assert.deepEqual(sent?.body['input'], [...history, { type: 'compaction_trigger' }]);
    assert.equal(fx.upstream.requests.length, 0, 'svc made no summary of its own');

    const completed = events.find((e) => e['type'] === 'response.completed')?.['response'] as Obj;
    const output = completed['output'] as Obj[];
    assert.equal(output.length, 1);
    const item = output[0] as Obj;
    assert.equal(item['type'], 'compaction');
    assert.equal(item['id'], upstreamItem['id']);
    assert.match(String(item['encrypted_content']), /^svc_cmp\.1\./);
    assert.ok(!String(item['encrypted_content']).includes('gAAAA'), "the upstream's item is sealed, not shown");
    // The item events carry the same sealed item as the completed response.
    const done = events.find((e) => e['type'] === 'response.output_item.done')?.['item'] as Obj;
    assert.deepEqual(done, item);
    assert.equal(completed['model'], 'svc-codex');
    assert.equal((completed['usage'] as Obj)['input_tokens'], 2048);
    assert.equal((completed['usage'] as Obj)['cost'], Number(TRIGGER_PRICE));
    const wallet = await fx.settled(accountId);
    assert.equal(wallet.balance, 1_000_000n - TRIGGER_PRICE);
  });

  it("hands the wrapped item back to the upstream unchanged in a later input; another account's copy is refused before any hold", async () => {
    const a = await fx.fund(1_000_000);
    const b = await fx.fund(1_000_000);
    const item = await nativeItem(a.key);
    assert.equal(await fx.balance(a.accountId), 1_000_000n - TRIGGER_PRICE);
    up.requests.length = 0;

    const next = await fx.client(a.key).responses.create({
      model: 'svc-codex',
      input: [item, { role: 'user', content: 'go on' }] as unknown as OpenAI.Responses.ResponseInput,
      store: false,
    });
    assert.equal(next.status, 'completed');
    assert.equal(up.requests.length, 1);
    const input = up.requests[0]?.body['input'] as Obj[];
    assert.deepEqual(input[0], upstreamItem, 'the upstream got its own item back, byte for byte');
    assert.deepEqual(input[1], { role: 'user', content: 'go on' });

    up.requests.length = 0;
    const response = await post(fx.baseURL, '/responses', b.key, {
      model: 'svc-codex',
      input: [item, { role: 'user', content: 'go on' }],
    });
    assert.equal(response.status, 400);
    const { error } = (await response.json()) as { error: Obj };
    assert.equal(error['type'], 'invalid_request_error');
    assert.equal(error['param'], 'input[0].encrypted_content');
    assert.equal(up.requests.length, 0);
    assert.equal(await fx.balance(b.accountId), 1_000_000n);
  });

  it("POST /responses/compact goes to the upstream's own endpoint through the real client; its output comes back with the compaction item sealed, and opens for the next turn", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const compacted = await fx.client(key).responses.compact({
      model: 'svc-codex',
      input: history as OpenAI.Responses.ResponseInput,
      instructions: 'You are Codex.',
    });
    assert.equal(up.requests.length, 1);
    const sent = up.requests[0];
    assert.equal(sent?.path, '/v1/responses/compact');
    assert.deepEqual(sent?.body, { model: 'gpt-5.1-codex-max', input: history, instructions: 'You are Codex.' });
    assert.equal(compacted.object, 'response.compaction');
    assert.equal(compacted.output.length, compactAnswer.output.length);
    assert.deepEqual(compacted.output[0], compactAnswer.output[0], 'the kept user message as the upstream gave it');
    const item = compacted.output[1] as unknown as Obj;
    assert.equal(item['type'], 'compaction');
    assert.match(String(item['encrypted_content']), /^svc_cmp\.1\./);
    assert.equal(compacted.usage.output_tokens, 438);
    assert.equal((compacted.usage as unknown as Obj)['cost'], Number(COMPACT_PRICE));
    assert.equal(await fx.balance(accountId), 1_000_000n - COMPACT_PRICE);

    up.requests.length = 0;
    await fx.client(key).responses.create({
      model: 'svc-codex',
      input: [...compacted.output, { role: 'user', content: 'next' }] as unknown as OpenAI.Responses.ResponseInput,
      store: false,
    });
    const input = up.requests[0]?.body['input'] as Obj[];
    assert.deepEqual(input[1], compactAnswer.output[1]);
  });

  it("seals a compaction item the upstream makes on its own in a passed-through turn (context_management), and a stored one cannot be continued through svc's translation", async () => {
    const { key } = await fx.fund(1_000_000);
    up.enqueue({ sample: 'openai-responses/response-compaction.json' });
    const response = await post(fx.baseURL, '/responses', key, {
      model: 'svc-codex',
      input: history,
      context_management: [{ type: 'compaction', compact_threshold: 1000 }],
    });
    assert.equal(response.status, 200);
    assert.deepEqual(up.requests[0]?.body['context_management'], [{ type: 'compaction', compact_threshold: 1000 }]);
    const body = (await response.json()) as Obj;
    const item = (body['output'] as Obj[])[0] as Obj;
    assert.equal(item['type'], 'compaction');
    assert.match(String(item['encrypted_content']), /^svc_cmp\.1\./);

    // Stored, its conversation holds the upstream's item: previous_response_id (translated) is refused.
    up.requests.length = 0;
    const next = await post(fx.baseURL, '/responses', key, {
      model: 'svc-codex',
      previous_response_id: body['id'],
      input: 'go on',
    });
    assert.equal(next.status, 400);
    const { error } = (await next.json()) as { error: Obj };
    assert.equal(error['param'], 'previous_response_id');
    assert.equal(up.requests.length, 0);
  });

  it('a native upstream that fails before any output costs nothing', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    up.enqueue({ sample: 'openai-responses/error-400.json', status: 500 });
    const response = await post(fx.baseURL, '/responses/compact', key, { model: 'svc-codex', input: history });
    assert.ok(response.status >= 500, `status ${response.status}`);
    const wallet = await fx.settled(accountId);
    assert.equal(wallet.balance, 1_000_000n);
  });

  it('falls back to the next native upstream when the first fails before any output, charged once; a model whose upstreams do not all have the switch is compacted by svc', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    up.enqueue({ sample: 'openai-responses/error-400.json', status: 503 });
    const compacted = await fx.client(key).responses.compact({
      model: 'svc-codex-pair',
      input: history as OpenAI.Responses.ResponseInput,
    });
    assert.deepEqual(
      up.requests.map((r) => r.path),
      ['/v1/responses/compact', '/v1/responses/compact'],
    );
    assert.match(String((compacted.output[1] as unknown as Obj)['encrypted_content']), /^svc_cmp\.1\./);
    assert.equal(await fx.balance(accountId), 1_000_000n - COMPACT_PRICE);

    up.requests.length = 0;
    const mixed = await fx.client(key).responses.compact({
      model: 'svc-codex-mixed',
      input: history as OpenAI.Responses.ResponseInput,
    });
    assert.equal(up.requests.length, 1);
    assert.equal(up.requests[0]?.path, '/v1/responses');
    assert.match(JSON.stringify(up.requests[0]?.body['input']), /CONTEXT CHECKPOINT COMPACTION/);
    assert.equal(mixed.output.length, 1);
    // The upstream's item, made on the pair, opens only on a model whose upstreams all compact natively.
    const response = await post(fx.baseURL, '/responses', key, {
      model: 'svc-codex-mixed',
      input: [compacted.output[1], { role: 'user', content: 'go on' }],
    });
    assert.equal(response.status, 400);
  });

  it('refuses a wrapped upstream item sent to a model whose upstream cannot open it (another kind, or the switch off), naming the item, before any hold', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const item = await nativeItem(key);
    const balance = await fx.balance(accountId);
    up.requests.length = 0;
    for (const [target, why] of [
      ['svc-pro', /not served by an openai-responses upstream/],
      ['svc-codex-plain', /does not compact natively/],
    ] as const) {
      const response = await post(fx.baseURL, '/responses', key, {
        model: target,
        input: [{ role: 'user', content: 'before' }, item, { role: 'user', content: 'go on' }],
      });
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as { error: Obj };
      assert.equal(error['type'], 'invalid_request_error');
      assert.equal(error['param'], 'input[1]');
      assert.match(String(error['message']), why);
      assert.match(String(error['message']), /svc-codex/);
    }
    // On the native model, a request svc must translate (previous_response_id) cannot carry it either.
    const stored = await fx.client(key).responses.create({ model: 'svc-codex', input: 'hi' });
    up.requests.length = 0;
    const translated = await post(fx.baseURL, '/responses', key, {
      model: 'svc-codex',
      previous_response_id: stored.id,
      input: [item, { role: 'user', content: 'go on' }],
    });
    assert.equal(translated.status, 400);
    const { error } = (await translated.json()) as { error: Obj };
    assert.equal(error['param'], 'input[0]');
    assert.match(String(error['message']), /translation/);
    assert.equal(up.requests.length, 0);
    assert.equal(fx.upstream.requests.length, 0);
    const afterStored = await fx.balance(accountId);
    assert.ok(afterStored < balance, 'only the stored turn was charged');
  });

  it("over WebSocket (Codex): a trigger continuing the connection's last response is compacted by the upstream, and the next turn hands it its own item", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const ws = new WebSocket(`${fx.baseURL.replace(/^http/, 'ws')}/responses`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const messages: Obj[] = [];
    let notify = (): void => undefined;
    ws.on('message', (data) => {
      messages.push(JSON.parse(String(data)) as Obj);
      notify();
    });
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    const turn = async (message: Obj): Promise<Obj> => {
      const from = messages.length;
      ws.send(JSON.stringify({ type: 'response.create', ...message }));
      for (;;) {
        const end = messages.slice(from).find((m) => m['type'] === 'response.completed' || m['type'] === 'error');
        if (end !== undefined) return end;
        await new Promise<void>((resolve) => (notify = resolve));
      }
    };
    try {
      const first = await turn({ model: 'svc-codex', input: history, tools: [shell], store: false });
      const firstId = (first['response'] as Obj)['id'];
      const compacted = await turn({
        model: 'svc-codex',
        previous_response_id: firstId,
        input: [{ type: 'compaction_trigger' }],
        tools: [shell],
        store: false,
      });
      assert.equal(compacted['type'], 'response.completed', JSON.stringify(compacted));
      const sent = up.requests[1]?.body['input'] as Obj[];
      assert.deepEqual(sent[sent.length - 1], { type: 'compaction_trigger' });
      const output = (compacted['response'] as Obj)['output'] as Obj[];
      assert.equal(output.length, 1);
      assert.match(String(output[0]?.['encrypted_content']), /^svc_cmp\.1\./);
      // Codex then starts over from the compacted history: the item and a new message.
      const next = await turn({
        model: 'svc-codex',
        input: [output[0], { role: 'user', content: 'go on' }],
        tools: [shell],
        store: false,
      });
      assert.equal(next['type'], 'response.completed');
      assert.deepEqual((up.requests[2]?.body['input'] as Obj[])[0], upstreamItem);
    } finally {
      ws.close();
    }
    const wallet = await fx.settled(accountId);
    assert.ok(wallet.balance <= 1_000_000n - TRIGGER_PRICE);
  });

  it('without the switch, svc synthesises compaction with the model as before', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const compacted = (await fx.client(key).responses.create({
      model: 'svc-codex-plain',
      input: [...history, { type: 'compaction_trigger' }] as OpenAI.Responses.ResponseInput,
      store: false,
    })) as unknown as Obj;
    assert.equal(up.requests.length, 1);
    const sent = up.requests[0]?.body['input'] as Obj[];
    assert.ok(!sent.some((i) => i['type'] === 'compaction_trigger'), 'the trigger never reaches the upstream');
    assert.match(JSON.stringify(sent[sent.length - 1]), /CONTEXT CHECKPOINT COMPACTION/);
    const output = compacted['output'] as Obj[];
    assert.equal(output.length, 1);
    assert.equal(output[0]?.['type'], 'compaction');
    // The default reply (response-reasoning.json): 81 in, 1035 out.
    assert.equal(await fx.balance(accountId), 1_000_000n - expectedCost(81, 1035));
    // svc's own item opens on any model.
    up.requests.length = 0;
    const next = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: [output[0], { role: 'user', content: 'go on' }] as unknown as OpenAI.Responses.ResponseInput,
    });
    assert.equal(next.status, 'completed');
  });
});
