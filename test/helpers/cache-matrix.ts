import assert from 'node:assert/strict';
import { Metadata } from 'nice-grpc';
import {
  CACHING_OUTPUT_TOKENS,
  type CacheOutcome,
  type CachingRequestSeen,
  type CachingWire,
  type FakeCachingUpstream,
} from '../fakes/caching-upstream';
import type { FundedKey, TestSvc } from './harness';

/*
 * The real coding assistants against the caching fake of every upstream kind (issue 42 point 7):
 * one model per kind in one config, and the check that each turn was charged the tariff over the
 * tiers the fake reported for it (SPEC §6 and §13), on the usage record and in the ledger.
 */

/** Every upstream kind the caching fake speaks. */
export const CACHE_KINDS: readonly CachingWire[] = ['anthropic', 'openai', 'openai-responses', 'gemini'];

// Anthropic's ratios: reads at a tenth, five-minute writes at 1.25×, one-hour writes at 2× input.
export const CACHE_RATES = {
  input: 300_000n,
  read: 30_000n,
  write5m: 375_000n,
  write1h: 600_000n,
  output: 1_500_000n,
} as const;

/** The model id for `kind` under `prefix` (e.g. `cc-openai-responses`). */
export const cacheModel = (prefix: string, kind: CachingWire): string => `${prefix}-${kind}`;

/** The `models:` entries (no header) of one model per upstream kind, all on the caching fake `up`. */
export function cachingModels(up: FakeCachingUpstream, prefix: string): string {
  const r = CACHE_RATES;
  return CACHE_KINDS.map((kind) => {
    const base = kind === 'anthropic' ? up.baseUrl : kind === 'gemini' ? `${up.baseUrl}/v1beta` : `${up.baseUrl}/v1`;
    return `
  ${cacheModel(prefix, kind)}:
    provider: ${kind}
    base_url: ${base}
    api_key: upstream-key
    upstream_model: up-${kind}
    price: { input_per_1m: ${r.input}, output_per_1m: ${r.output}, cached_input_per_1m: ${r.read}, cache_write_per_1m: ${r.write5m}, cache_write_1h_per_1m: ${r.write1h} }
    context_window: 200000
    max_output_tokens: 8000
`;
  }).join('');
}

/** SPEC §6 over what the fake reported for one call, written apart from svc's pricing code. */
export function tariffOver(c: CacheOutcome): bigint {
  const r = CACHE_RATES;
  const uncached = BigInt(c.prompt - c.read - c.write5m - c.write1h);
  const total =
    uncached * r.input +
    BigInt(c.read) * r.read +
    BigInt(c.write5m) * r.write5m +
    BigInt(c.write1h) * r.write1h +
    BigInt(CACHING_OUTPUT_TOKENS) * r.output;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

/** Waits until the account holds nothing (a stream settles after its client stopped reading). */
export async function settled(svc: TestSvc, accountId: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if ((await svc.wallet(accountId)).held === 0n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`account ${accountId}: a hold was never settled`);
}

/** One model call as the five counts and its cost: `input/read/write/write1h/output = cost`. */
const line = (input: number, read: number, write: number, write1h: number, output: number, cost: bigint): string =>
  `${input}/${read}/${write}/${write1h}/${output} = ${cost}`;

/**
 * Each upstream call in `seen` was charged once, at the tariff over the tiers the fake reported
 * for it: the account's model calls (its usage records) are exactly those calls, each record's
 * counts and cost are the fake's tiers and their tariff, and the ledger charge of each record's
 * request is that cost. Other charges (`others`, e.g. a tool's price) are the rest of the ledger.
 */
export async function assertTurnsCharged(
  svc: TestSvc,
  k: FundedKey,
  seen: readonly CachingRequestSeen[],
  others: readonly bigint[] = [],
): Promise<void> {
  await settled(svc, k.accountId);
  const meta = { metadata: new Metadata({ authorization: `Bearer ${k.key}` }) };
  const page = await svc.connection.clients.usage.listUsage({ filter: {}, pageSize: 500 }, meta);
  const calls = page.records.filter((r) => r.model !== '');
  const expected = seen
    .map((s) =>
      line(
        s.cache.prompt,
        s.cache.read,
        s.cache.write5m + s.cache.write1h,
        s.cache.write1h,
        CACHING_OUTPUT_TOKENS,
        tariffOver(s.cache),
      ),
    )
    .sort();
  const got = calls
    .map((r) =>
      line(
        Number(r.inputTokens),
        Number(r.cachedTokens),
        Number(r.cacheWriteTokens),
        Number(r.cacheWrite1hTokens),
        Number(r.outputTokens),
        r.cost,
      ),
    )
    .sort();
  assert.deepEqual(got, expected, 'each call: the tiers the fake reported, and the tariff over them');
  const charges = (await svc.ledger(k.accountId, 1000)).filter((e) => e.kind === 'charge');
  for (const r of calls) {
    const mine = charges.filter((e) => e.requestId === r.requestId);
    assert.deepEqual(
      mine.map((e) => -e.amount),
      [r.cost],
      `request ${r.requestId}: charged once, its record's cost`,
    );
  }
  const rest = charges
    .filter((e) => !calls.some((r) => r.requestId === e.requestId))
    .map((e) => -e.amount)
    .sort();
  assert.deepEqual(rest, [...others].sort(), 'the other charges');
}
