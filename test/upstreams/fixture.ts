import OpenAI from 'openai';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';

export const INPUT_PER_1M = 150_000n;
export const CACHED_PER_1M = 15_000n;
export const OUTPUT_PER_1M = 600_000n;

/** SPEC §6, computed apart from the code under test. */
export function expectedCost(prompt: number, completion: number, cached = 0): bigint {
  const total =
    BigInt(prompt - cached) * INPUT_PER_1M + BigInt(cached) * CACHED_PER_1M + BigInt(completion) * OUTPUT_PER_1M;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

/** Three fake upstreams behind one svc, and a clock the test can move (for breakers). */
export interface RoutingFixture {
  readonly svc: TestSvc;
  /** a: priority 1; b and c: priority 2, weight 1 each. */
  readonly a: FakeUpstream;
  readonly b: FakeUpstream;
  readonly c: FakeUpstream;
  readonly baseURL: string;
  client(key: string): OpenAI;
  fund(balance: number): Promise<FundedKey>;
  /** Moves the core's clock forward. */
  advance(ms: number): void;
  /** The value of one series in GET /metrics (0 when absent). */
  metric(name: string, labels: Record<string, string>): Promise<number>;
  settled(accountId: string): Promise<{ balance: bigint; held: bigint }>;
  close(): Promise<void>;
}

/**
 * `routed` (a → b|c, breaker `breaker`), `single` on `a` alone, and extra YAML under `models:`.
 * Upstream timeouts are short so that a hang is a quick upstream_timeout.
 */
export async function startRoutingFixture(
  options: { breaker?: string; extraModels?: (urls: { a: string; b: string; c: string }) => string } = {},
): Promise<RoutingFixture> {
  const [a, b, c] = await Promise.all([startFakeUpstream(), startFakeUpstream(), startFakeUpstream()]);
  const urls = { a: a.baseUrl, b: b.baseUrl, c: c.baseUrl };
  const upstream = (url: string, name: string, extra: string): string => `
      - provider: openai
        base_url: ${url}
        api_key: key-${name}-0123456789
        upstream_model: model-${name}
        timeout_ms: 1500${extra}`;
  const config = `models:
  routed:
    price:
      input_per_1m: ${INPUT_PER_1M}
      output_per_1m: ${OUTPUT_PER_1M}
      cached_input_per_1m: ${CACHED_PER_1M}
    max_output_tokens: 1000
    aliases: [gpt-4o-mini]
    upstreams:${upstream(a.baseUrl, 'a', '\n        priority: 1')}${upstream(b.baseUrl, 'b', '\n        priority: 2')}${upstream(c.baseUrl, 'c', '\n        priority: 2\n        weight: 1')}
    breaker: ${options.breaker ?? '{ failures: 3, open_s: 30 }'}
${options.extraModels?.(urls) ?? ''}
limits:
  requests_per_minute: 100000
`;
  let offset = 0;
  const svc = await startSvc({ config, now: () => Date.now() + offset });
  const baseURL = `${svc.baseUrl}/v1/openai`;
  return {
    svc,
    a,
    b,
    c,
    baseURL,
    client: (key) => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 }),
    fund: (balance) => svc.createFundedKey(balance),
    advance(ms) {
      offset += ms;
    },
    async metric(name, labels) {
      const text = await svc.core.metrics.registry.render();
      const want = Object.entries(labels)
        .map(([k, v]) => `${k}="${v}"`)
        .sort();
      for (const line of text.split('\n')) {
        const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
        if (m === null || m[1] !== name) continue;
        const have = (m[2] ?? '').split(',').sort();
        if (want.every((w) => have.includes(w))) return Number(m[3]);
      }
      return 0;
    },
    async settled(accountId) {
      for (let i = 0; i < 500; i += 1) {
        const w = await svc.wallet(accountId);
        if (w.held === 0n) return { balance: w.balance, held: w.held };
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('the hold was never settled');
    },
    async close() {
      await svc.close();
      await Promise.all([a.close(), b.close(), c.close()]);
    },
  };
}
