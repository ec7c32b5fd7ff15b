import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type OpenAI from 'openai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { configB, connectClient } from '../mcp/helpers';
import { startOpenAiFixture, type OpenAiFixture } from './fixture';

type Json = Record<string, unknown>;

/**
 * Issue 30, "Done when": one run through every wire (OpenAI chat and Responses with hosted
 * search, Anthropic, Gemini with grounding, embeddings, MCP) on a small wallet and on a capped
 * key, with upstreams that fail mid-loop, report no usage and report absurd usage. Afterwards
 * every wallet equals its top-ups minus the sum of the costs its client was shown, no cap is past
 * its limit, no hold is left, and every "nothing was charged" was true.
 */
describe('money at the edges: a mixed run over every wire (issue 30)', function () {
  this.timeout(120_000);
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;
  const mcpClients: Client[] = [];

  before(async () => {
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({
      extraConfig: () => configB(fakes),
      extraModels: () => `
  svc-embed:
    provider: sandbox
    kind: embedding
    dimensions: [16]
    price: { input_per_1m: 20000 }
`,
    });
  });
  after(async () => {
    await Promise.all(mcpClients.map((c) => c.close()));
    await fx.close();
    await fakes.close();
  });

  /** One payer: what its client was shown, call by call. */
  interface Payer {
    readonly accountId: string;
    readonly key: string;
    readonly funded: bigint;
    shown: bigint;
    readonly log: string[];
  }

  const balanceOf = async (p: Payer): Promise<bigint> => (await fx.svc.wallet(p.accountId)).balance;

  /**
   * Runs one call: `shown` is what the client was told it cost (a header, a usage field, MCP's
   * `svc/cost`), 0 for an error; an error whose words say nothing was charged must leave the
   * balance as it was.
   */
  async function step(
    p: Payer,
    label: string,
    upstream: FakeBehavior[],
    call: () => Promise<{ shown: bigint; words?: string }>,
    most?: bigint,
  ): Promise<void> {
    // Each call gets its own upstream script: a call refused before the upstream leaves none behind.
    fx.upstream.reset();
    if (upstream.length > 0) fx.upstream.enqueue(...upstream);
    const before = await balanceOf(p);
    let outcome: { shown: bigint; words?: string };
    try {
      outcome = await call();
    } catch (error) {
      outcome = { shown: 0n, words: error instanceof Error ? error.message : String(error) };
    }
    await fx.settled(p.accountId);
    const after = await balanceOf(p);
    p.shown += outcome.shown;
    p.log.push(`${label}: shown ${outcome.shown}, balance ${before} -> ${after}`);
    if (/nothing was charged/i.test(outcome.words ?? ''))
      assert.equal(after, before, `${label} said nothing was charged: ${outcome.words ?? ''}`);
    assert.equal(before - after, outcome.shown, `${label}: the charge is what the client was shown`);
    // An answer whose upstream reported no usage is served and charged from svc's own count.
    if (/no usage/.test(label)) assert.ok(outcome.shown > 0n, `${label} was served: ${outcome.words ?? ''}`);
    if (most !== undefined) assert.ok(outcome.shown <= most, `${label}: charged ${outcome.shown}, above its hold`);
  }

  const header = (res: Response): bigint => BigInt(res.headers.get('x-svc-cost') ?? '0');

  async function post(p: Payer, path: string, body: Json, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${fx.svc.baseUrl}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${p.key}`, ...headers },
      body: JSON.stringify(body),
    });
  }

  /** A raw call: its cost header when it succeeded, else its error words. */
  async function raw(p: Payer, path: string, body: Json): Promise<{ shown: bigint; words?: string }> {
    const res = await post(p, path, body);
    const text = await res.text();
    return res.ok ? { shown: header(res) } : { shown: 0n, words: text };
  }

  const text = (usage: { prompt_tokens: number; completion_tokens: number } | 'omit'): FakeBehavior => ({
    kind: 'text',
    text: 'An answer.',
    usage,
  });
  const searching = (n: number): FakeBehavior => ({
    kind: 'tool_calls',
    calls: Array.from({ length: n }, (_, i) => ({
      id: `c${i}`,
      name: 'web_search',
      arguments: JSON.stringify({ query: `q ${i}` }),
    })),
    usage: { prompt_tokens: 60, completion_tokens: 10 },
  });
  const ABSURD = { prompt_tokens: 20, completion_tokens: 10_000_000 };

  async function runEveryWire(p: Payer): Promise<void> {
    const client = fx.client(p.key);
    const chat = async (): Promise<{ shown: bigint }> => {
      const c = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'Salam!' }],
      });
      return { shown: BigInt(String((c.usage as unknown as Json | undefined)?.['cost'] ?? 0)) };
    };
    await step(p, 'chat', [text({ prompt_tokens: 12, completion_tokens: 30 })], chat);
    await step(p, 'chat, no usage', [text('omit')], chat);
    await step(p, 'chat stream, no usage', [text('omit')], async () => {
      const stream = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'Salam!' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let shown = 0n;
      for await (const chunk of stream) {
        const cost = (chunk.usage as unknown as Json | undefined | null)?.['cost'];
        if (cost !== undefined) shown = BigInt(String(cost));
      }
      return { shown };
    });
    const loop = [searching(3), text({ prompt_tokens: 400, completion_tokens: 30 })];
    await step(p, 'responses with hosted search', loop, async () => {
      const r = await client.responses.create({
        model: 'svc-pro',
        input: 'news?',
        tools: [{ type: 'web_search' }],
        max_tool_calls: 1,
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      assert.ok(
        r.output.some((item) => item.type === 'web_search_call'),
        'the search ran',
      );
      return { shown: BigInt(String((r.usage as unknown as Json | undefined)?.['cost'] ?? 0)) };
    });
    await step(
      p,
      'responses, loop failing at turn 2',
      [searching(1), { kind: 'http_error', status: 500 }],
      async () => {
        const r = await client.responses.create({
          model: 'svc-pro',
          input: 'news?',
          tools: [{ type: 'web_search' }],
          max_tool_calls: 1,
        } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
        assert.equal(r.status, 'incomplete');
        return { shown: BigInt(String((r.usage as unknown as Json | undefined)?.['cost'] ?? 0)) };
      },
    );
    // Up to 8 searches by default: more than these payers can hold, so refused up front, free.
    await step(p, 'gemini with googleSearch', [searching(1), text({ prompt_tokens: 300, completion_tokens: 20 })], () =>
      raw(p, '/v1/gemini/v1beta/models/svc-pro:generateContent', {
        contents: [{ role: 'user', parts: [{ text: 'fastapi notes' }] }],
        tools: [{ googleSearch: {} }],
      }),
    );
    await step(p, 'gemini, no usage', [text('omit')], () =>
      raw(p, '/v1/gemini/v1beta/models/svc-pro:generateContent', {
        contents: [{ role: 'user', parts: [{ text: 'hello' }] }],
      }),
    );
    await step(p, 'embeddings', [], () =>
      raw(p, '/v1/openai/embeddings', { model: 'svc-embed', input: ['one', 'two'] }),
    );
    const mcp = await connectClient(fx.svc.baseUrl, p.key);
    mcpClients.push(mcp);
    for (const [name, args] of [
      ['maps_search_places', { query: 'cafe' }],
      ['shopping_search', { query: 'phone' }],
    ] as const) {
      await step(p, `mcp ${name}`, [], async () => {
        const result = (await mcp.callTool({ name, arguments: args })) as CallToolResult;
        const meta = (result._meta ?? {}) as Json;
        const words = result.isError === true ? JSON.stringify(result.content) : undefined;
        return { shown: BigInt(String(meta['svc/cost'] ?? 0)), ...(words === undefined ? {} : { words }) };
      });
    }
    // Last, as they would drain a small wallet on a build where usage above the hold is charged:
    // an upstream reporting 10^7 output tokens is charged at most the hold (prompt + 50 or the
    // model's 1,000 output tokens: well under 1,000 credits here).
    await step(
      p,
      'anthropic, absurd usage',
      [text(ABSURD)],
      () =>
        raw(p, '/v1/anthropic/v1/messages', {
          model: 'svc-pro',
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hi' }],
        }),
      1_000n,
    );
    await step(p, 'chat, absurd usage', [text(ABSURD)], chat, 1_000n);
  }

  async function books(p: Payer): Promise<void> {
    if (process.env['SVC_TEST_VERBOSE'] === '1') process.stdout.write(`${p.log.join('\n')}\n`);
    const w = await fx.settled(p.accountId);
    assert.equal(w.held, 0n, 'no hold is left');
    assert.equal(p.funded - w.balance, p.shown, `the wallet moved by exactly what was shown:\n${p.log.join('\n')}`);
    assert.ok(w.balance >= 0n);
    const ledger = await fx.svc.ledger(p.accountId, 1000);
    assert.equal(
      ledger.reduce((sum, e) => sum + e.amount, 0n),
      w.balance,
      'balance = sum(ledger)',
    );
  }

  it('a small wallet: every wire, every fault; the books equal what each client was shown', async () => {
    fakes.set('searxng', 'ok');
    const funded = await fx.fund(3_000);
    const p: Payer = { accountId: funded.accountId, key: funded.key, funded: 3_000n, shown: 0n, log: [] };
    await runEveryWire(p);
    await books(p);
  });

  it('a key capped at 2,000 on a rich wallet: the same run, and the cap is never passed', async () => {
    fakes.set('searxng', 'ok');
    const funded = await fx.fund(1_000_000);
    const { key, secret } = await fx.svc.core.keys.create({
      accountId: funded.accountId,
      name: 'capped',
      capTotal: 2_000n,
    });
    const p: Payer = { accountId: funded.accountId, key: secret, funded: 1_000_000n, shown: 0n, log: [] };
    await runEveryWire(p);
    await books(p);
    const listed = (await fx.svc.core.keys.list(funded.accountId)).find((k) => k.id === key.id);
    assert.ok(listed !== undefined);
    const spent = listed.spentTotal;
    assert.ok(spent <= 2_000n, `the cap's spend ${spent} is within 2,000`);
    assert.equal(spent, p.shown, 'what the cap counts is what was charged');
  });
});
