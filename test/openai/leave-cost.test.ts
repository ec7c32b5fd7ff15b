import assert from 'node:assert/strict';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * Leaving never costs more than finishing (SPEC §6, issue 48 point 4): a client that leaves a
 * stream pays for the prompt and the tokens it was handed, counted with svc's tokenizer
 * (cl100k_base), never the 4-bytes-a-token guess that charged 1.79× what finishing did. Every
 * client wire, over the same upstream: the chat fake sends "one two … ten" a word a chunk.
 */

const PROMPT = 'count slowly';
const TEXT = 'one two three four five six seven eight nine ten';
/** The prompt as an upstream with this tokenizer counts it: 3 per request, 4 per message, the text. */
const PROMPT_TOKENS = 3 + 4 + countTokens(PROMPT);

async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition never became true');
}

interface Wire {
  readonly name: string;
  request(fx: OpenAiFixture, key: string): { url: string; init: RequestInit };
}

const json = (key: string, extra: Record<string, string> = {}): Record<string, string> => ({
  authorization: `Bearer ${key}`,
  'content-type': 'application/json',
  ...extra,
});

const WIRES: readonly Wire[] = [
  {
    name: 'OpenAI chat completions',
    request: (fx, key) => ({
      url: `${fx.baseURL}/chat/completions`,
      init: {
        method: 'POST',
        headers: json(key),
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: PROMPT }], stream: true }),
      },
    }),
  },
  {
    name: 'OpenAI Responses',
    request: (fx, key) => ({
      url: `${fx.baseURL}/responses`,
      init: {
        method: 'POST',
        headers: json(key),
        body: JSON.stringify({ model: 'svc-pro', input: PROMPT, stream: true }),
      },
    }),
  },
  {
    name: 'Anthropic Messages',
    request: (fx, key) => ({
      url: `${fx.svc.baseUrl}/v1/anthropic/v1/messages`,
      init: {
        method: 'POST',
        headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'svc-pro',
          max_tokens: 500,
          messages: [{ role: 'user', content: PROMPT }],
          stream: true,
        }),
      },
    }),
  },
  {
    name: 'Gemini streamGenerateContent',
    request: (fx, key) => ({
      url: `${fx.svc.baseUrl}/v1/gemini/v1beta/models/svc-pro:streamGenerateContent?alt=sse`,
      init: {
        method: 'POST',
        headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }] }),
      },
    }),
  },
];

/** Reads the stream until its text holds `until`, then leaves; resolves once the upstream request was dropped. */
async function leaveWhen(fx: OpenAiFixture, wire: Wire, key: string, behavior: FakeBehavior, mark: string) {
  fx.upstream.enqueue(behavior);
  const aborted = fx.upstream.aborted;
  const controller = new AbortController();
  const { url, init } = wire.request(fx, key);
  const response = await fetch(url, { ...init, signal: controller.signal });
  if (response.status !== 200) throw new Error(`${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  while (!seen.includes(mark)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before ${mark}: ${seen}`);
    seen += decoder.decode(value, { stream: true });
  }
  controller.abort();
  await reader.cancel().catch(() => undefined);
  await until(
    () => fx.upstream.aborted,
    (n) => n === aborted + 1,
  );
  return seen;
}

/** Reads the whole stream. */
async function finish(fx: OpenAiFixture, wire: Wire, key: string, behavior: FakeBehavior): Promise<string> {
  fx.upstream.enqueue(behavior);
  const { url, init } = wire.request(fx, key);
  const response = await fetch(url, init);
  assert.equal(response.status, 200);
  return response.text();
}

async function charges(fx: OpenAiFixture, accountId: string) {
  return fx.svc.store.db
    .selectFrom('usage_records')
    .select(['status', 'cost', 'input_tokens', 'output_tokens'])
    .where('account_id', '=', accountId)
    .execute();
}

describe('Leaving a stream never costs more than finishing it (every wire)', function () {
  this.timeout(60_000);
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx?.close();
  });
  beforeEach(() => fx.upstream.reset());

  for (const wire of WIRES) {
    describe(wire.name, () => {
      it('a client that read every chunk and left before the final usage frame pays what finishing costs, no more', async () => {
        const outputTokens = countTokens(TEXT);
        // Finishing: the upstream reports the same tokens svc's tokenizer counts.
        const finished = await fx.fund(100_000);
        await finish(fx, wire, finished.key, {
          kind: 'text',
          text: TEXT,
          usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: outputTokens },
        });
        const finishing = 100_000n - (await fx.settled(finished.accountId)).balance;
        assert.equal(finishing, expectedCost(PROMPT_TOKENS, outputTokens));

        // Leaving: every chunk up to the finish came, the upstream's usage and [DONE] did not.
        const left = await fx.fund(100_000);
        await leaveWhen(fx, wire, left.key, { kind: 'text', text: TEXT, withholdEnd: true }, '"ten"');
        const leaving = 100_000n - (await fx.settled(left.accountId)).balance;
        assert.ok(leaving <= finishing, `leaving cost ${leaving}, finishing ${finishing}`);
        assert.equal(leaving, expectedCost(PROMPT_TOKENS, outputTokens));
        assert.deepEqual(await charges(fx, left.accountId), [
          {
            status: 'cancelled',
            cost: leaving,
            input_tokens: BigInt(PROMPT_TOKENS),
            output_tokens: BigInt(outputTokens),
          },
        ]);
        const ledger = await fx.svc.ledger(left.accountId);
        assert.equal(ledger.filter((e) => e.kind === 'charge').length, 1);
      });

      it('a client that leaves early pays for the prompt and the tokens it received', async () => {
        const { key, accountId } = await fx.fund(100_000);
        // Three words, then the upstream sends nothing more.
        await leaveWhen(fx, wire, key, { kind: 'stall', afterPieces: 3 }, '"three "');
        const received = countTokens('one two three ');
        const wallet = await fx.settled(accountId);
        assert.equal(wallet.balance, 100_000n - expectedCost(PROMPT_TOKENS, received));
        assert.deepEqual(await charges(fx, accountId), [
          {
            status: 'cancelled',
            cost: expectedCost(PROMPT_TOKENS, received),
            input_tokens: BigInt(PROMPT_TOKENS),
            output_tokens: BigInt(received),
          },
        ]);
      });
    });
  }
});
