import OpenAI from 'openai';
import type { Logger } from 'pino';
import { startSvc, type FundedKey, type TestSvc } from '../helpers/harness';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';

/** Prices of the test models (SPEC's example tariff): credits per 1M tokens. */
export const INPUT_PER_1M = 150_000n;
export const OUTPUT_PER_1M = 600_000n;
export const MAX_OUTPUT = 1000;

/** SPEC §6, computed independently of the code under test. */
export function expectedCost(promptTokens: number, completionTokens: number): bigint {
  const total = BigInt(promptTokens) * INPUT_PER_1M + BigInt(completionTokens) * OUTPUT_PER_1M;
  const cost = (total + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

/** The test models (plus `extraModels`, YAML entries indented under `models:`), then `extra` top-level YAML. */
export function testConfig(upstreamBaseUrl: string, extra = '', extraModels = ''): string {
  const model = (name: string, timeoutMs: number): string => `
  ${name}:
    provider: openai
    base_url: ${upstreamBaseUrl}
    api_key: test-upstream-secret
    upstream_model: fake-model-1
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 128000
    max_output_tokens: ${MAX_OUTPUT}
    timeout_ms: ${timeoutMs}`;
  return `models:${model('svc-pro', 30000)}${model('svc-quick-timeout', 400)}
  svc-sandbox:
    provider: sandbox
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
${extraModels}${extra}`;
}

export interface OpenAiFixture {
  readonly svc: TestSvc;
  readonly upstream: FakeUpstream;
  /** http://127.0.0.1:PORT/v1/openai */
  readonly baseURL: string;
  client(key: string, options?: Partial<ConstructorParameters<typeof OpenAI>[0]>): OpenAI;
  fund(balance: bigint | number): Promise<FundedKey>;
  balance(accountId: string): Promise<bigint>;
  /** Waits until the account has no hold left (a stream's settle runs after the client stopped reading). */
  settled(accountId: string): Promise<{ balance: bigint; held: bigint }>;
  close(): Promise<void>;
}

export async function startOpenAiFixture(
  options: {
    extraConfig?: string | ((upstreamBaseUrl: string) => string);
    extraModels?: (upstreamBaseUrl: string) => string;
    /** The core's and the adapters' logger (silent by default). */
    logger?: Logger;
    /** How long the core trusts the stored exchange rate it read (0: read at every admission). */
    priceCacheMs?: number;
  } = {},
): Promise<OpenAiFixture> {
  const upstream = await startFakeUpstream();
  const extra = typeof options.extraConfig === 'function' ? options.extraConfig(upstream.baseUrl) : options.extraConfig;
  const svc = await startSvc({
    config: testConfig(upstream.baseUrl, extra, options.extraModels?.(upstream.baseUrl)),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.priceCacheMs !== undefined ? { priceCacheMs: options.priceCacheMs } : {}),
  });
  const baseURL = `${svc.baseUrl}/v1/openai`;
  return {
    svc,
    upstream,
    baseURL,
    client: (key, extra = {}) => new OpenAI({ baseURL, apiKey: key, maxRetries: 0, ...extra }),
    fund: (balance) => svc.createFundedKey(balance),
    balance: async (accountId) => (await svc.wallet(accountId)).balance,
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
      await upstream.close();
    },
  };
}
