import assert from 'node:assert/strict';
import { Metadata } from 'nice-grpc';
import type { UsageRecord } from '../../gen/svc/core/v1/usage';
import { runSvc } from '../cli/run-svc';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { startFakeGeminiUpstream, type FakeGeminiUpstream } from '../fakes/gemini-upstream';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { consoleClient, createConsoleUser } from '../console/helpers';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';

/*
 * Every cache tier billed and shown (issue 42, SPEC §6 and §13): an upstream's usage, in each
 * upstream's shape, becomes the five counts (uncached input, cache reads, five-minute writes,
 * one-hour writes, output), each priced at its own rate, on every client wire's usage, the ledger
 * charge, the usage record and `svc usage`.
 */

// Anthropic's ratios: reads at a tenth, five-minute writes at 1.25×, one-hour writes at 2× input.
const RATES = { input: 300_000n, read: 30_000n, write5m: 375_000n, write1h: 600_000n, output: 1_500_000n };
const PRICE = `input_per_1m: ${RATES.input}, output_per_1m: ${RATES.output}, cached_input_per_1m: ${RATES.read}, cache_write_per_1m: ${RATES.write5m}`;

/** The five counts SPEC §13 keeps apart (reasoning is inside output). */
interface Tiers {
  readonly uncached: number;
  readonly read: number;
  readonly write5m: number;
  readonly write1h: number;
  readonly output: number;
}

const inputOf = (t: Tiers): number => t.uncached + t.read + t.write5m + t.write1h;

/** The tariff, written out apart from svc's pricing code: ceil(sum / 1e6), at least 1. */
function tariff(t: Tiers, write1hRate = RATES.write1h): bigint {
  const total =
    BigInt(t.uncached) * RATES.input +
    BigInt(t.read) * RATES.read +
    BigInt(t.write5m) * RATES.write5m +
    BigInt(t.write1h) * write1hRate +
    BigInt(t.output) * RATES.output;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

// What each upstream fake reports (test/fakes/samples/SOURCES.md for the recorded shapes).
const ANTHROPIC: Tiers = { uncached: 4, read: 1800, write5m: 188, write1h: 8611, output: 69 };
const OPENAI: Tiers = { uncached: 12, read: 1800, write5m: 188, write1h: 0, output: 69 };
const RESPONSES: Tiers = OPENAI;
const GEMINI: Tiers = { uncached: 200, read: 1800, write5m: 0, write1h: 0, output: 69 };

const GEMINI_ANSWER = {
  candidates: [{ content: { parts: [{ text: 'Every tier.' }], role: 'model' }, finishReason: 'STOP', index: 0 }],
  usageMetadata: {
    promptTokenCount: 2000,
    cachedContentTokenCount: 1800,
    candidatesTokenCount: 60,
    thoughtsTokenCount: 9,
    totalTokenCount: 2069,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: 2000 }],
    cacheTokensDetails: [{ modality: 'TEXT', tokenCount: 1800 }],
  },
  modelVersion: 'gemini-2.5-flash',
  responseId: 'cache-tiers-01',
};

// A prompt whose bound covers every token the fakes report: the hold is the most a call may cost,
// so usage beyond it would be charged at the hold and hide the tariff.
const PROMPT = 'cache me '.repeat(6000);
const MAX_TOKENS = 1000;

type Wire = 'anthropic' | 'chat' | 'responses' | 'gemini';
type Obj = Record<string, unknown>;

const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});

/** The SSE events of a body: each `data:` line's JSON (with its `event:` name when there is one). */
function sseData(text: string): Obj[] {
  return text
    .split(/\r?\n\r?\n/)
    .map(
      (block) =>
        block
          .split(/\r?\n/)
          .find((line) => line.startsWith('data:'))
          ?.slice(5)
          .trim() ?? '',
    )
    .filter((data) => data !== '' && data !== '[DONE]')
    .map((data) => JSON.parse(data) as Obj);
}

/** A wire's usage object, checked against the five counts in that wire's own shape. */
function assertWireUsage(wire: Wire, usage: Obj, t: Tiers, what: string): void {
  const writes = t.write5m + t.write1h;
  switch (wire) {
    case 'anthropic':
      assert.equal(usage['input_tokens'], t.uncached, `${what}: input_tokens`);
      assert.equal(usage['cache_read_input_tokens'], t.read, `${what}: cache_read_input_tokens`);
      assert.equal(usage['cache_creation_input_tokens'], writes, `${what}: cache_creation_input_tokens`);
      assert.equal(usage['output_tokens'], t.output, `${what}: output_tokens`);
      break;
    case 'chat': {
      assert.equal(usage['prompt_tokens'], inputOf(t), `${what}: prompt_tokens`);
      const details = obj(usage['prompt_tokens_details']);
      assert.equal(details['cached_tokens'], t.read, `${what}: cached_tokens`);
      assert.equal(details['cache_write_tokens'], writes > 0 ? writes : undefined, `${what}: cache_write_tokens`);
      assert.equal(usage['completion_tokens'], t.output, `${what}: completion_tokens`);
      break;
    }
    case 'responses': {
      assert.equal(usage['input_tokens'], inputOf(t), `${what}: input_tokens`);
      const details = obj(usage['input_tokens_details']);
      assert.equal(details['cached_tokens'], t.read, `${what}: cached_tokens`);
      assert.equal(details['cache_write_tokens'] ?? 0, writes, `${what}: cache_write_tokens`);
      assert.equal(usage['output_tokens'], t.output, `${what}: output_tokens`);
      break;
    }
    case 'gemini':
      assert.equal(usage['promptTokenCount'], inputOf(t), `${what}: promptTokenCount`);
      assert.equal(
        usage['cachedContentTokenCount'],
        t.read > 0 ? t.read : undefined,
        `${what}: cachedContentTokenCount`,
      );
      assert.equal(
        Number(usage['candidatesTokenCount'] ?? 0) + Number(usage['thoughtsTokenCount'] ?? 0),
        t.output,
        `${what}: candidatesTokenCount + thoughtsTokenCount`,
      );
      break;
  }
}

describe('every cache tier billed and shown (issue 42)', function () {
  this.timeout(120_000);
  let anthropic: FakeAnthropicUpstream;
  let openai: FakeUpstream;
  let responses: FakeResponsesUpstream;
  let google: FakeGeminiUpstream;
  let svc: TestSvc;

  before(async () => {
    [anthropic, openai, responses, google] = await Promise.all([
      startFakeAnthropicUpstream(),
      startFakeUpstream(),
      startFakeResponsesUpstream(),
      startFakeGeminiUpstream(),
    ]);
    const model = (
      name: string,
      upstream: string,
      price = `${PRICE}, cache_write_1h_per_1m: ${RATES.write1h}`,
    ): string => `
  ${name}:
    price: { ${price} }
    context_window: 200000
    max_output_tokens: 4000
${upstream}`;
    svc = await startSvc({
      config: `models:${model(
        'up-anthropic',
        `    provider: anthropic
    base_url: ${anthropic.baseUrl}
    api_key: ${FAKE_ANTHROPIC_KEY}
    upstream_model: claude-opus-4-8`,
      )}${model(
        'up-anthropic-1h-default',
        `    provider: anthropic
    base_url: ${anthropic.baseUrl}
    api_key: ${FAKE_ANTHROPIC_KEY}
    upstream_model: claude-opus-4-8`,
        PRICE,
      )}${model(
        'up-openai',
        `    provider: openai
    base_url: ${openai.baseUrl}
    upstream_model: gpt-cache`,
      )}${model(
        'up-responses',
        `    provider: openai-responses
    base_url: ${responses.baseUrl}
    api_key: ${FAKE_RESPONSES_KEY}
    upstream_model: gpt-cache`,
      )}${model(
        'up-gemini',
        `    provider: gemini
    base_url: ${google.baseUrl}
    api_key: test-gemini-secret
    upstream_model: gemini-2.5-flash`,
      )}
`,
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([anthropic?.close(), openai?.close(), responses?.close(), google?.close()]);
  });

  /** Queues each upstream's next answer (the one the call about to be made gets). */
  function queue(model: string, stream: boolean): void {
    if (model === 'up-anthropic' || model === 'up-anthropic-1h-default')
      anthropic.enqueue({ sample: stream ? 'anthropic/stream-cache-tiers.sse' : 'anthropic/message-cache-tiers.json' });
    else if (model === 'up-openai')
      openai.enqueue({
        kind: 'text',
        text: 'Every tier.',
        usage: {
          prompt_tokens: 2000,
          completion_tokens: 69,
          cached_tokens: 1800,
          cache_write_tokens: 188,
          reasoning_tokens: 9,
        },
      });
    else if (model === 'up-responses')
      responses.enqueue({
        sample: stream ? 'openai-responses/stream-cache-tiers.sse' : 'openai-responses/response-cache-tiers.json',
      });
    else if (stream) {
      const frames = [
        { ...GEMINI_ANSWER, candidates: [{ content: { parts: [{ text: 'Every ' }], role: 'model' }, index: 0 }] },
        {
          ...GEMINI_ANSWER,
          candidates: [{ ...GEMINI_ANSWER.candidates[0], content: { parts: [{ text: 'tier.' }], role: 'model' } }],
        },
      ];
      google.next({ kind: 'sse-text', text: frames.map((f) => `data: ${JSON.stringify(f)}\n\n`).join('') });
    } else google.next({ kind: 'json', body: GEMINI_ANSWER });
  }

  /** One call on a client wire; returns the usage object the client got and svc's request id. */
  async function call(
    key: string,
    wire: Wire,
    model: string,
    stream: boolean,
  ): Promise<{ usage: Obj; requestId: string; events: Obj[] }> {
    queue(model, stream);
    const user = [{ role: 'user', content: PROMPT }];
    let url: string;
    let headers: Record<string, string> = { 'content-type': 'application/json' };
    let body: Obj;
    switch (wire) {
      case 'anthropic':
        url = `${svc.baseUrl}/v1/anthropic/v1/messages`;
        headers = { ...headers, 'x-api-key': key, 'anthropic-version': '2023-06-01' };
        body = { model, max_tokens: MAX_TOKENS, messages: user, ...(stream ? { stream } : {}) };
        break;
      case 'chat':
        url = `${svc.baseUrl}/v1/openai/chat/completions`;
        headers = { ...headers, authorization: `Bearer ${key}` };
        body = {
          model,
          max_tokens: MAX_TOKENS,
          messages: user,
          ...(stream ? { stream, stream_options: { include_usage: true } } : {}),
        };
        break;
      case 'responses':
        url = `${svc.baseUrl}/v1/openai/responses`;
        headers = { ...headers, authorization: `Bearer ${key}` };
        body = { model, max_output_tokens: MAX_TOKENS, input: PROMPT, store: false, ...(stream ? { stream } : {}) };
        break;
      case 'gemini':
        url = `${svc.baseUrl}/v1/gemini/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`;
        headers = { ...headers, 'x-goog-api-key': key };
        body = {
          contents: [{ role: 'user', parts: [{ text: PROMPT }] }],
          generationConfig: { maxOutputTokens: MAX_TOKENS },
        };
        break;
    }
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await res.text();
    assert.equal(res.status, 200, `${wire} ${model}${stream ? ' stream' : ''}: ${text.slice(0, 500)}`);
    const requestId = res.headers.get('x-request-id') ?? '';
    assert.notEqual(requestId, '');
    if (!stream)
      return {
        usage: obj(obj(JSON.parse(text))[wire === 'gemini' ? 'usageMetadata' : 'usage']),
        requestId,
        events: [],
      };
    const events = sseData(text);
    let usage: Obj | undefined;
    for (const e of events) {
      if (wire === 'anthropic' && e['type'] === 'message_delta') usage = obj(e['usage']);
      if (wire === 'chat' && e['usage'] !== undefined && e['usage'] !== null) usage = obj(e['usage']);
      if (wire === 'responses' && e['type'] === 'response.completed') usage = obj(obj(e['response'])['usage']);
      if (wire === 'gemini' && e['usageMetadata'] !== undefined) usage = obj(e['usageMetadata']);
    }
    assert.ok(usage !== undefined, `${wire} stream: a final usage (${text.slice(-600)})`);
    return { usage, requestId, events };
  }

  const asKey = (key: string) => ({ metadata: new Metadata({ authorization: `Bearer ${key}` }) });

  async function recordOf(key: string, requestId: string): Promise<UsageRecord> {
    const page = await svc.connection.clients.usage.listUsage({ filter: { requestId }, pageSize: 10 }, asKey(key));
    assert.equal(page.records.length, 1, `one usage record for ${requestId}`);
    return page.records[0] as UsageRecord;
  }

  async function chargeOf(k: FundedKey, requestId: string): Promise<bigint> {
    const entries = (await svc.ledger(k.accountId, 1000)).filter(
      (e) => e.kind === 'charge' && e.requestId === requestId,
    );
    assert.equal(entries.length, 1, `one charge for ${requestId}`);
    return -(entries[0]?.amount ?? 0n);
  }

  /** The record keeps the five counts apart, and agrees with the ledger and the tariff. */
  async function assertBilled(
    k: FundedKey,
    requestId: string,
    t: Tiers,
    what: string,
    rate1h = RATES.write1h,
  ): Promise<void> {
    const cost = tariff(t, rate1h);
    assert.equal(await chargeOf(k, requestId), cost, `${what}: the ledger charge is the tariff over the tiers`);
    const r = await recordOf(k.key, requestId);
    assert.deepEqual(
      {
        uncached: Number(r.inputTokens - r.cachedTokens - r.cacheWriteTokens),
        read: Number(r.cachedTokens),
        write5m: Number(r.cacheWriteTokens - r.cacheWrite1hTokens),
        write1h: Number(r.cacheWrite1hTokens),
        output: Number(r.outputTokens),
      },
      t,
      `${what}: the usage record`,
    );
    assert.equal(r.cost, cost, `${what}: the record's cost`);
  }

  it('bills a one-hour cache write at cache_write_1h_per_1m: 8,611 tokens, 5,272 credits, not 3,334', async () => {
    const k = await svc.createFundedKey(1_000_000);
    const example: Tiers = { uncached: 4, read: 0, write5m: 0, write1h: 8611, output: 69 };
    for (const [model, expected, rate] of [
      ['up-anthropic', 5272n, RATES.write1h],
      // Without the key, one-hour writes take cache_write_per_1m (the price of before).
      ['up-anthropic-1h-default', 3334n, RATES.write5m],
    ] as const) {
      anthropic.enqueue({ sample: 'anthropic/message-cache-1h.json' });
      const res = await fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': k.key, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: PROMPT }] }),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const requestId = res.headers.get('x-request-id') ?? '';
      assert.equal(tariff(example, rate), expected, 'the test’s own arithmetic');
      assert.equal(await chargeOf(k, requestId), expected, model);
      await assertBilled(k, requestId, example, model, rate);
      const usage = obj(obj(JSON.parse(text))['usage']);
      assert.deepEqual(usage['cache_creation'], { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 8611 });
    }
  });

  const UPSTREAMS: readonly [string, Tiers][] = [
    ['up-anthropic', ANTHROPIC],
    ['up-openai', OPENAI],
    ['up-responses', RESPONSES],
    ['up-gemini', GEMINI],
  ];
  const WIRES: readonly Wire[] = ['anthropic', 'chat', 'responses', 'gemini'];

  for (const [model, tiers] of UPSTREAMS)
    it(`round-trips every tier from the ${model.slice(3)} upstream's usage to each wire, the ledger and the record`, async () => {
      const k = await svc.createFundedKey(1_000_000);
      for (const wire of WIRES) {
        const what = `${wire} ← ${model}`;
        const { usage, requestId } = await call(k.key, wire, model, false);
        assertWireUsage(wire, usage, tiers, what);
        if (wire === 'anthropic')
          assert.deepEqual(
            usage['cache_creation'],
            { ephemeral_5m_input_tokens: tiers.write5m, ephemeral_1h_input_tokens: tiers.write1h },
            `${what}: cache_creation is the tiers, never null`,
          );
        await assertBilled(k, requestId, tiers, what);
      }
    });

  for (const wire of WIRES)
    it(`shows the tiers in the ${wire} wire's final stream usage`, async () => {
      const k = await svc.createFundedKey(1_000_000);
      for (const [model, tiers] of UPSTREAMS) {
        const what = `${wire} stream ← ${model}`;
        const { usage, requestId, events } = await call(k.key, wire, model, true);
        assertWireUsage(wire, usage, tiers, what);
        if (wire === 'anthropic') {
          const split = { ephemeral_5m_input_tokens: tiers.write5m, ephemeral_1h_input_tokens: tiers.write1h };
          const start = obj(obj(events.find((e) => e['type'] === 'message_start')?.['message'])['usage']);
          if (model === 'up-anthropic') {
            // The native path: the upstream's own events, the split in message_start, and
            // message_delta's usage as Anthropic streams it (the SDK's MessageDeltaUsage).
            assert.deepEqual(start['cache_creation'], split, `${what}: message_start's cache_creation`);
            assert.equal(usage['cache_creation'], undefined, `${what}: message_delta as Anthropic streams it`);
          } else {
            // A translation: message_delta's usage has the SDK's shape (no `cache_creation`; the
            // writes' sum is checked above); message_start's split is an object, never null: the
            // split where the first chunk carried the usage (Gemini's running usage), else zeros.
            assert.equal(usage['cache_creation'], undefined, `${what}: message_delta as Anthropic streams it`);
            const early = obj(start['cache_creation']);
            assert.deepEqual(Object.keys(early).sort(), Object.keys(split).sort(), `${what}: message_start's`);
            assert.ok(
              [0, tiers.write5m].includes(early['ephemeral_5m_input_tokens'] as number) &&
                [0, tiers.write1h].includes(early['ephemeral_1h_input_tokens'] as number),
              `${what}: message_start's cache_creation ${JSON.stringify(early)}`,
            );
          }
        }
        await assertBilled(k, requestId, tiers, what);
      }
    });

  it('svc usage --cache shows, per key and model, the cache-read share and what caching saved', async () => {
    const k = await svc.createFundedKey(1_000_000);
    const second = await svc.core.keys.create({ accountId: k.accountId, name: 'second' });
    await call(k.key, 'chat', 'up-anthropic', false);
    await call(k.key, 'chat', 'up-anthropic', false);
    await call(second.secret, 'anthropic', 'up-gemini', false);
    const env = { SVC_DATABASE_URL: svc.databaseUrl };
    const run = await runSvc(['usage', '--account', k.accountId, '--cache', '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as { cache: Obj[]; total_saved: number };
    const row = (keyId: string, model: string): Obj | undefined =>
      out.cache.find((c) => c['key_id'] === keyId && c['model'] === model);
    // Two calls of 10,603 input tokens, 1,800 of each read from the cache: 16.9 % (rounded down);
    // saved: 3,600 reads × (300,000 − 30,000) / 1e6 = 972 credits.
    const first = row(k.keyId, 'up-anthropic');
    assert.ok(first, JSON.stringify(out));
    assert.deepEqual(
      [first['requests'], first['input_tokens'], first['cached_tokens'], first['cache_read_share'], first['saved']],
      [2, 2 * inputOf(ANTHROPIC), 3600, 16.9, 972],
    );
    assert.deepEqual([first['cache_write_5m_tokens'], first['cache_write_1h_tokens']], [376, 17_222]);
    assert.equal(first['cost'], Number(2n * tariff(ANTHROPIC)));
    // 1,800 of 2,000 read: 90 %; saved 1,800 × 270,000 / 1e6 = 486 credits.
    const other = row(second.key.id, 'up-gemini');
    assert.ok(other, JSON.stringify(out));
    assert.deepEqual([other['cache_read_share'], other['saved']], [90, 486]);
    assert.equal(out.total_saved, 972 + 486);

    const table = await runSvc(['usage', '--account', k.accountId, '--cache'], env);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /16\.9%/);
    assert.match(table.stdout, /caching saved 1458 credits/);

    // The records list the five counts apart too.
    const records = JSON.parse((await runSvc(['usage', '--account', k.accountId, '--json'], env)).stdout) as {
      records: Obj[];
    };
    const anthropicRecord = records.records.find((r) => r['model'] === 'up-anthropic');
    assert.deepEqual(
      [
        anthropicRecord?.['uncached_input_tokens'],
        anthropicRecord?.['cached_tokens'],
        anthropicRecord?.['cache_write_5m_tokens'],
        anthropicRecord?.['cache_write_1h_tokens'],
        anthropicRecord?.['output_tokens'],
      ],
      [4, 1800, 188, 8611, 69],
    );

    // The same totals over gRPC, as the console reads them.
    const summary = await svc.connection.clients.usage.getUsageSummary({ filter: {} }, asKey(k.key));
    const grpcRow = summary.cacheTotals.find((c) => c.keyId === k.keyId && c.model === 'up-anthropic');
    assert.deepEqual([grpcRow?.cachedTokens, grpcRow?.saved], [3600n, 972n]);
  });

  it("the console's usage page shows, per key and model, the cache-read share and what caching saved", async () => {
    const user = await createConsoleUser(svc, {
      name: 'Cache',
      email: 'cache-tiers@example.com',
      balance: 1_000_000n,
      keyName: 'coding assistant',
    });
    await call(user.key, 'anthropic', 'up-anthropic', false);
    await call(user.key, 'responses', 'up-anthropic', true);
    await call(user.key, 'gemini', 'up-gemini', false);
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    for (const [lang, share1, share2] of [
      ['en', '16.9%', '90%'],
      ['fa', '۱۶٫۹٪', '۹۰٪'],
    ] as const) {
      assert.equal((await c.get(`/lang?to=${lang}&back=%2Fconsole%2Fusage`)).status, 303);
      const page = await c.get('/usage');
      assert.equal(page.status, 200);
      const table = page.body.split('data-testid="cache-totals"')[1]?.split('</table>')[0] ?? '';
      const rows = table.split('<tbody>')[1]?.split('<tr>').slice(1) ?? [];
      const cells = (model: string): string[] =>
        (rows.find((r) => r.includes(`>${model}<`)) ?? '')
          .split(/<td[^>]*>/)
          .slice(1)
          .map(
            (cell) =>
              cell
                .split('</td>')[0]
                ?.replace(/<[^>]+>/g, '')
                .trim() ?? '',
          );
      const anthropicRow = cells('up-anthropic');
      const geminiRow = cells('up-gemini');
      assert.equal(rows.length, 2, table);
      // Two calls of 10,603 input tokens, 3,600 read: 16.9 %; 3,600 × 270,000 / 1e6 = 972 saved.
      assert.equal(anthropicRow[3], share1, `${lang}: ${anthropicRow.join(' | ')}`);
      assert.match(anthropicRow[5] ?? '', lang === 'en' ? /^972 toman$/ : /^۹۷۲ تومان$/);
      if (lang === 'en') assert.equal(anthropicRow[4], '376 / 17,222', 'five-minute / one-hour writes');
      assert.equal(geminiRow[3], share2);
      assert.match(geminiRow[5] ?? '', lang === 'en' ? /^486 toman$/ : /^۴۸۶ تومان$/);
    }

    // The CSV export: each call's cache reads, five-minute and one-hour writes and what its reads
    // saved (1,800 × 270,000 / 1e6 = 486 credits a call), beside its cost.
    const csv = await c.get('/usage.csv?days=7');
    assert.equal(csv.status, 200);
    const [header, ...lines] = csv.body.trimEnd().split('\r\n');
    const names = (header ?? '').split(',');
    const rows = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [names[i] ?? `${i}`, v])));
    const columns = ['cache_read_tokens', 'cache_write_5m_tokens', 'cache_write_1h_tokens', 'cache_saved_toman'];
    const cacheOf = (model: string): string[][] =>
      rows
        .filter((r) => r['model_or_tool'] === model)
        .map((r) => [r['input_tokens'] ?? '', r['cost_toman'] ?? '', ...columns.map((n) => r[n] ?? '')]);
    const cells = (t: Tiers): string[] => [inputOf(t), tariff(t), t.read, t.write5m, t.write1h, 486].map(String);
    assert.deepEqual(cacheOf('up-anthropic'), [cells(ANTHROPIC), cells(ANTHROPIC)], csv.body);
    assert.deepEqual(cacheOf('up-gemini'), [cells(GEMINI)], csv.body);
  });
});
