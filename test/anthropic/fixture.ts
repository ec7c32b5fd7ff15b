import Anthropic from '@anthropic-ai/sdk';
import { startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

/** What one response cost, as svc reported it (header, or the SSE comment at the end of a stream). */
export interface ReportedCost {
  readonly url: string;
  readonly cost: bigint;
}

export interface AnthropicFixture extends OpenAiFixture {
  /** http://127.0.0.1:PORT/v1/anthropic (ANTHROPIC_BASE_URL). */
  readonly anthropicURL: string;
  /** The official client on svc; it records every cost svc reports into `costs`. */
  anthropic(key: string, options?: Partial<ConstructorParameters<typeof Anthropic>[0]>): Anthropic;
  readonly costs: ReportedCost[];
  /** The costs reported so far, once every stream read has finished. */
  reportedCosts(): Promise<ReportedCost[]>;
}

/**
 * The OpenAI fixture's svc and fake chat upstream, with the Anthropic client pointed at
 * `/v1/anthropic`. Its fetch reads the cost of every answer as the client's user could: the
 * `x-svc-cost` header, or a stream's closing `: svc-cost N balance M` comment.
 */
export async function startAnthropicFixture(
  options: Parameters<typeof startOpenAiFixture>[0] = {},
): Promise<AnthropicFixture> {
  const fx = await startOpenAiFixture(options);
  const anthropicURL = `${fx.svc.baseUrl}/v1/anthropic`;
  const costs: ReportedCost[] = [];
  const pending: Promise<void>[] = [];
  const recordingFetch: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const header = response.headers.get('x-svc-cost');
    if (header !== null) costs.push({ url, cost: BigInt(header) });
    else if ((response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      pending.push(
        response
          .clone()
          .text()
          .then((text) => {
            const m = /^: svc-cost (\d+) balance/m.exec(text);
            if (m?.[1] !== undefined) costs.push({ url, cost: BigInt(m[1]) });
          }),
      );
    }
    return response;
  };
  return {
    ...fx,
    anthropicURL,
    costs,
    async reportedCosts() {
      await Promise.all(pending);
      return costs;
    },
    anthropic: (key, extra = {}) =>
      new Anthropic({ baseURL: anthropicURL, apiKey: key, maxRetries: 0, fetch: recordingFetch, ...extra }),
    async close() {
      await Promise.allSettled(pending);
      await fx.close();
    },
  };
}
