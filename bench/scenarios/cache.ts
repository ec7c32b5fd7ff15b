// Caching through svc (issue 42, SPEC §13): a 20-turn Claude-Code-shaped session (its billing
// block rotating `cch=` with every request, streamed Messages) and a 20-turn Codex-shaped session
// (streamed Responses with its `prompt_cache_key` and `session_id`), each sent through svc to
// every upstream kind of the caching fake (test/fakes/caching-upstream.ts: prefix caches as each
// provider documents), and the same conversation sent straight to that upstream in its own wire
// (the billing block left out): "direct". Reported per upstream kind: the cache-read tokens and
// the cache-read share of the prompt tokens (reads ÷ prompt) through svc and direct, and how far
// the session's charge is from the tariff over the usage the fake reported, turn by turn (goal:
// 0 credits). The goal of the issue: through svc, cache reads ≥ 98 % of direct on every kind;
// judged on the share, since a translation's prompt is not the same number of tokens as the
// upstream's own wire (a Messages conversation on a chat upstream is a little shorter).
// svc runs in-process (the test harness, SQLite): this scenario measures what is cached and
// charged, not speed.
import {
  startFakeCachingUpstream,
  type CacheOutcome,
  type FakeCachingUpstream,
} from '../../test/fakes/caching-upstream';
import { chatTurn, claudeCodeTurn, codexTurn, geminiTurn } from '../../test/fakes/coding-sessions';
import { startSvc, type TestSvc } from '../../test/helpers/harness';
import type { BenchOptions, BenchRow } from '../types';

const TURNS = 20;
const KINDS = ['anthropic', 'openai', 'openai-responses', 'gemini'] as const;
type Kind = (typeof KINDS)[number];
// A Sonnet-like tariff (reads 0.1×, writes 1.25× the input price), in credits per 1M tokens.
const PRICE = { input: 300_000n, output: 1_500_000n, cached: 30_000n, write: 375_000n };
const START = 1_000_000_000n;

function models(fake: FakeCachingUpstream): string {
  return KINDS.map((kind) => {
    const base =
      kind === 'anthropic' ? fake.baseUrl : kind === 'gemini' ? `${fake.baseUrl}/v1beta` : `${fake.baseUrl}/v1`;
    return `
  c-${kind}:
    provider: ${kind}
    base_url: ${base}
    api_key: bench
    upstream_model: up-${kind}
    price: { input_per_1m: ${PRICE.input}, output_per_1m: ${PRICE.output}, cached_input_per_1m: ${PRICE.cached}, cache_write_per_1m: ${PRICE.write} }
    context_window: 200000
    max_output_tokens: 4000`;
  }).join('');
}

/** SPEC §6 over one turn's usage as the fake reported it (2 output tokens a turn). */
function tariff(c: CacheOutcome): bigint {
  const writes = BigInt(c.write5m + c.write1h);
  const uncached = BigInt(c.prompt - c.read) - writes;
  const total = uncached * PRICE.input + BigInt(c.read) * PRICE.cached + writes * PRICE.write + 2n * PRICE.output;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

interface Sums {
  reads: number;
  prompt: number;
}
const sums = (list: readonly CacheOutcome[]): Sums => ({
  reads: list.reduce((s, c) => s + c.read, 0),
  prompt: list.reduce((s, c) => s + c.prompt, 0),
});

async function send(url: string, body: unknown, headers: Record<string, string>): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text.slice(0, 300)}`);
}

/** The conversation sent straight to the upstream of `kind`, in its own wire. */
async function direct(fake: FakeCachingUpstream, kind: Kind): Promise<Sums> {
  fake.reset();
  for (let k = 1; k <= TURNS; k++) {
    if (kind === 'anthropic')
      await send(`${fake.baseUrl}/v1/messages`, claudeCodeTurn(k, k, { model: 'up', billing: false }), {});
    else if (kind === 'openai') await send(`${fake.baseUrl}/v1/chat/completions`, chatTurn(k, { model: 'up' }), {});
    else if (kind === 'openai-responses')
      await send(`${fake.baseUrl}/v1/responses`, codexTurn(k, { model: 'up', cacheKey: 'conv-1' }), {});
    else await send(`${fake.baseUrl}/v1beta/models/up:generateContent`, geminiTurn(k), {});
  }
  return sums(fake.requests.map((r) => r.cache));
}

type Session = 'claude-code' | 'codex';

/** The session through svc onto `kind`: its sums, and the charge less the tariff. */
async function throughSvc(
  fake: FakeCachingUpstream,
  svc: TestSvc,
  session: Session,
  kind: Kind,
): Promise<Sums & { off: bigint; charged: bigint }> {
  fake.reset();
  const { key, accountId } = await svc.createFundedKey(START, `${session}-${kind}`);
  for (let k = 1; k <= TURNS; k++) {
    if (session === 'claude-code')
      await send(
        `${svc.baseUrl}/v1/anthropic/v1/messages`,
        claudeCodeTurn(k, k, { model: `c-${kind}`, stream: true }),
        {
          'x-api-key': key,
          'anthropic-version': '2023-06-01',
          'x-claude-code-session-id': `cc-${kind}`,
        },
      );
    else
      await send(
        `${svc.baseUrl}/v1/openai/responses`,
        codexTurn(k, { model: `c-${kind}`, stream: true, cacheKey: `codex-${kind}` }),
        { authorization: `Bearer ${key}`, session_id: `codex-${kind}` },
      );
  }
  const outcomes = fake.requests.map((r) => r.cache);
  if (outcomes.length !== TURNS) throw new Error(`${session} → ${kind}: ${outcomes.length} upstream calls`);
  const wallet = await svc.wallet(accountId);
  if (wallet.held !== 0n) throw new Error(`${session} → ${kind}: ${wallet.held} still held`);
  const charged = START - wallet.balance;
  const expected = outcomes.reduce((s, c) => s + tariff(c), 0n);
  return { ...sums(outcomes), off: charged - expected, charged };
}

const pct = (n: number): string => `${(n * 100).toFixed(1)} %`;

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const fake = await startFakeCachingUpstream();
  let svc: TestSvc | undefined;
  const table: string[] = [
    '| session | upstream | cache reads direct | through svc | read share direct | through svc | svc ÷ direct (share) | charge | charge − tariff |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  try {
    svc = await startSvc({ config: `models:${models(fake)}\n` });
    const baselines = new Map<Kind, Sums>();
    for (const kind of KINDS) baselines.set(kind, await direct(fake, kind));
    // What Claude Code's own billing block does to the same session sent straight to Anthropic.
    fake.reset();
    for (let k = 1; k <= TURNS; k++)
      await send(`${fake.baseUrl}/v1/messages`, claudeCodeTurn(k, k, { model: 'up' }), {});
    const billed = sums(fake.requests.map((r) => r.cache));
    console.log(
      `  Claude Code direct to anthropic with its billing block: read share ${pct(billed.reads / billed.prompt)}`,
    );
    for (const session of ['claude-code', 'codex'] as const) {
      const scenario = `cache: ${session === 'claude-code' ? 'Claude-Code' : 'Codex'}-shaped session, ${TURNS} turns`;
      for (const kind of KINDS) {
        const base = baselines.get(kind) as Sums;
        const through = await throughSvc(fake, svc, session, kind);
        const shareDirect = base.reads / base.prompt;
        const shareSvc = through.reads / through.prompt;
        const ratio = shareSvc / shareDirect;
        console.log(
          `  ${session} → ${kind}: reads ${through.reads} (direct ${base.reads}), share ${pct(shareSvc)} (direct ${pct(shareDirect)}), ${pct(ratio)} of direct; charged ${through.charged}, ${through.off} off the tariff`,
        );
        table.push(
          `| ${session} | ${kind} | ${base.reads.toLocaleString('en')} | ${through.reads.toLocaleString('en')} | ${pct(shareDirect)} | ${pct(shareSvc)} | ${pct(ratio)}${ratio >= 0.98 ? '' : ' (**below 98 %**)'} | ${through.charged.toLocaleString('en')} | ${through.off.toString()} |`,
        );
        rows.push(
          {
            scenario,
            variant: `direct → ${kind}`,
            metric: `cache-read share (${kind})`,
            value: shareDirect * 100,
            unit: '%',
          },
          {
            scenario,
            variant: `svc → ${kind}`,
            metric: `cache-read share (${kind})`,
            value: shareSvc * 100,
            unit: '%',
          },
          { scenario, variant: `svc → ${kind}`, metric: `cache reads (${kind})`, value: through.reads, unit: 'tokens' },
          {
            scenario,
            variant: `svc → ${kind}`,
            metric: `charge − tariff (${kind})`,
            value: Number(through.off),
            unit: 'credits',
          },
        );
        if (ratio < 0.98)
          opts.fail(`cache ${session} → ${kind}`, new Error(`read share ${pct(ratio)} of direct, below 98 %`));
        if (through.off !== 0n)
          opts.fail(`cache ${session} → ${kind}`, new Error(`charged ${through.off} off the tariff`));
      }
    }
    console.log(`\n${table.join('\n')}\n`);
  } catch (error) {
    opts.fail('cache', error);
  } finally {
    await svc?.close();
    await fake.close();
  }
  return rows;
}
