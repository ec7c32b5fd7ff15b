import { GoogleGenAI } from '@google/genai';
import { startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

export interface GeminiFixture extends OpenAiFixture {
  /** http://127.0.0.1:PORT/v1/gemini (GOOGLE_GEMINI_BASE_URL). */
  readonly geminiURL: string;
  /** The official `@google/genai` client on svc (API version v1beta, its default; or `apiVersion`). */
  genai(key: string, apiVersion?: string): GoogleGenAI;
  /** Usage records of an account, oldest first. */
  usage(accountId: string): Promise<
    { kind: string; cost: bigint; status: string; requestId: string; inputTokens: number; outputTokens: number }[]
  >;
}

/** The OpenAI fixture's svc and fake chat upstream, with `@google/genai` pointed at `/v1/gemini`. */
export async function startGeminiFixture(
  options: Parameters<typeof startOpenAiFixture>[0] = {},
): Promise<GeminiFixture> {
  const fx = await startOpenAiFixture(options);
  const geminiURL = `${fx.svc.baseUrl}/v1/gemini`;
  return {
    ...fx,
    geminiURL,
    genai: (key, apiVersion) =>
      new GoogleGenAI({
        apiKey: key,
        httpOptions: { baseUrl: geminiURL, ...(apiVersion === undefined ? {} : { apiVersion }) },
      }),
    async usage(accountId) {
      const rows = await fx.svc.store.db
        .selectFrom('usage_records')
        .select(['kind', 'cost', 'status', 'request_id', 'input_tokens', 'output_tokens'])
        .where('account_id', '=', accountId)
        .orderBy('created_at')
        .execute();
      return rows.map((r) => ({
        kind: r.kind,
        cost: BigInt(r.cost),
        status: r.status,
        requestId: r.request_id,
        inputTokens: Number(r.input_tokens),
        outputTokens: Number(r.output_tokens),
      }));
    },
  };
}
