import { trace } from '@opentelemetry/api';
import type { Principal } from '../auth/types';
import type { BillingResult } from '../billing/types';
import type { ToolConfig, ToolPrice } from '../config/types';
import type { CoreDeps } from '../deps';
import { isSvcError, SvcError } from '../errors';
import { parseMapsArgs, parseShoppingArgs, parseWebSearchArgs } from './arguments';
import { TOOL_DEFINITIONS, type ToolDefinitionSpec } from './definitions';
import { createToolProviders } from './registry';
import type { ProviderResult, ToolName, ToolProvider } from './types';

/** What each tool costs when the configuration says nothing (SPEC §6). */
export const DEFAULT_TOOL_PRICES: Readonly<Record<ToolName, ToolPrice>> = {
  web_search: { kind: 'tokens', tariff: { inputPer1m: 100_000n, outputPer1m: 100_000n }, cap: 1_000n },
  maps_search_places: { kind: 'flat', credits: 460n },
  shopping_search: { kind: 'flat', credits: 230n },
};

const DEFAULT_TIMEOUT_MS = 15_000;

/** One tool as listed: its definition, its price and who serves it. */
export interface ListedTool {
  readonly definition: ToolDefinitionSpec;
  readonly price: ToolPrice;
  readonly provider: string;
}

/** The outcome of one call. Failures of the provider are results (`isError`), not exceptions. */
export type ToolCallOutcome =
  | {
      readonly isError: false;
      readonly structuredContent: Record<string, unknown>;
      readonly text: string;
      readonly billing: BillingResult;
      readonly provider: string;
    }
  | {
      readonly isError: true;
      readonly text: string;
      readonly errorCode: string;
      readonly billing: BillingResult | undefined;
      readonly provider: string;
    };

export interface ToolCall {
  readonly principal: Principal;
  readonly requestId: string;
  /** The id the client gave the request, for correlation only (never billing). */
  readonly clientRequestId?: string | undefined;
  readonly name: string;
  readonly arguments: unknown;
  /** Aborted when the caller goes away; cancels the provider request. */
  readonly signal: AbortSignal;
}

export interface ToolService {
  list(): readonly ListedTool[];
  /**
   * Validates, holds the price, calls the provider and settles. Throws SvcError for bad input
   * (invalid_argument, tool_not_found) and insufficient_credit, before any upstream is contacted.
   */
  call(call: ToolCall): Promise<ToolCallOutcome>;
  close(): Promise<void>;
}

interface Runnable {
  readonly definition: ToolDefinitionSpec;
  readonly price: ToolPrice;
  readonly provider: ToolProvider<unknown, unknown>;
  readonly parse: (raw: unknown) => unknown;
  /** Extra structured fields derived from the arguments (the maps search point). */
  readonly extra: (args: unknown) => Record<string, unknown>;
}

const SANDBOX_NOTICE =
  'Sandbox data: sample results from the offline dataset bundled with svc, not live search results.';

/** Credits for a token-billed call: the tariff, rounded up, at least 1, never above the hold. */
export function tokenCost(
  price: Extract<ToolPrice, { kind: 'tokens' }>,
  inputTokens: number,
  outputTokens: number,
): bigint {
  const micro =
    BigInt(Math.max(0, Math.trunc(inputTokens))) * price.tariff.inputPer1m +
    BigInt(Math.max(0, Math.trunc(outputTokens))) * price.tariff.outputPer1m;
  const cost = (micro + 999_999n) / 1_000_000n;
  const atLeastOne = cost < 1n ? 1n : cost;
  return atLeastOne > price.cap ? price.cap : atLeastOne;
}

function holdFor(price: ToolPrice): bigint {
  return price.kind === 'flat' ? price.credits : price.cap;
}

export function createToolService(
  deps: Pick<CoreDeps, 'config' | 'meter' | 'logger' | 'now'> & Partial<Pick<CoreDeps, 'wallet'>>,
): ToolService {
  const providers = createToolProviders(deps.config);
  const configOf = (name: ToolName): ToolConfig | undefined => deps.config.tools.get(name);
  const priceOf = (name: ToolName): ToolPrice => configOf(name)?.price ?? DEFAULT_TOOL_PRICES[name];

  const runnables = new Map<string, Runnable>();
  for (const definition of TOOL_DEFINITIONS) {
    const name = definition.name;
    const provider = providers[name] as ToolProvider<unknown, unknown>;
    const parse =
      name === 'web_search' ? parseWebSearchArgs : name === 'maps_search_places' ? parseMapsArgs : parseShoppingArgs;
    const extra =
      name === 'maps_search_places'
        ? (args: unknown) => {
            const { latitude, longitude } = args as { latitude: number; longitude: number };
            return { center: { latitude, longitude } };
          }
        : () => ({});
    runnables.set(name, { definition, price: priceOf(name), provider, parse, extra });
  }
  const listed: ListedTool[] = [...runnables.values()].map((r) => ({
    definition: r.definition,
    price: r.price,
    provider: r.provider.name,
  }));

  /**
   * A token-billed search costs a small part of its cap as a rule (tens of credits against a cap
   * of thousands), so holding the whole cap would shut out every wallet below it. Such a call
   * holds what the wallet has free, up to the cap, and is charged at most that hold: a search
   * from a nearly empty wallet can cost less than its tokens, never more than the wallet had.
   * The wallet's own hold still decides atomically (a concurrent call may take the credit first).
   */
  async function holdAmount(price: ToolPrice, accountId: string): Promise<bigint> {
    const most = holdFor(price);
    if (price.kind !== 'tokens' || deps.wallet === undefined) return most;
    const wallet = await deps.wallet.get(accountId);
    const free = wallet.balance - wallet.held;
    // An empty wallet is refused for the least a search costs (1), not for the cap.
    return free < most ? (free >= 1n ? free : 1n) : most;
  }

  async function call(request: ToolCall): Promise<ToolCallOutcome> {
    const tool = runnables.get(request.name);
    if (tool === undefined) {
      throw new SvcError(
        'tool_not_found',
        `Unknown tool "${request.name}"; available tools: ${[...runnables.keys()].join(', ')}`,
        { param: 'name' },
      );
    }
    const args = tool.parse(request.arguments ?? {});
    const name = tool.definition.name;
    // Cost and balance go on the span in the meter; the tool and its upstream go here.
    const span = trace.getActiveSpan();
    span?.setAttributes({ 'svc.tool.name': name, 'svc.tool.provider': tool.provider.name });
    const hold = await holdAmount(tool.price, request.principal.accountId);
    const metered = await deps.meter.begin({
      principal: request.principal,
      requestId: request.requestId,
      clientRequestId: request.clientRequestId,
      kind: 'tool',
      resource: name,
      provider: tool.provider.name,
      maxCost: hold,
    });
    const timeoutMs = configOf(name)?.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    let result: ProviderResult<unknown>;
    const started = deps.now();
    try {
      result = await tool.provider.run(args, request.signal);
    } catch (error) {
      const code = isSvcError(error) ? error.code : 'internal';
      const status = code === 'cancelled' ? 'cancelled' : 'error';
      await metered.fail({ errorCode: code, status });
      const detail = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      deps.logger.warn(
        {
          requestId: request.requestId,
          clientRequestId: request.clientRequestId,
          tool: name,
          provider: tool.provider.name,
          errorCode: code,
          detail,
          timeoutMs,
          elapsedMs: deps.now() - started,
        },
        'tool provider failed',
      );
      span?.recordException(error instanceof Error && error.cause instanceof Error ? error.cause : new Error(detail));
      if (!isSvcError(error) || code === 'cancelled') throw error;
      return { isError: true, text: error.message, errorCode: code, billing: undefined, provider: tool.provider.name };
    }

    const empty = result.items.length === 0;
    const cost = empty
      ? 0n
      : tool.price.kind === 'flat'
        ? tool.price.credits
        : tokenCost({ ...tool.price, cap: hold }, result.usage?.inputTokens ?? 0, result.usage?.outputTokens ?? 0);
    const billing = await metered.finish({
      cost,
      status: empty ? 'empty' : 'ok',
      ...(result.usage !== undefined
        ? { inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens }
        : {}),
    });
    const notices: string[] = [];
    if (tool.provider.sandbox) notices.push(SANDBOX_NOTICE);
    if (empty)
      notices.push(
        `Nothing was found for "${(args as { query: string }).query}". Try other or fewer words; this search cost nothing.`,
      );
    const structuredContent: Record<string, unknown> = {
      query: (args as { query: string }).query,
      provider: tool.provider.name,
      sandbox: tool.provider.sandbox,
      ...(notices.length > 0 ? { notice: notices.join(' ') } : {}),
      ...tool.extra(args),
      results: result.items,
    };
    return {
      isError: false,
      structuredContent,
      text: JSON.stringify(structuredContent),
      billing,
      provider: tool.provider.name,
    };
  }

  return {
    list: () => listed,
    call,
    async close() {
      await Promise.all(Object.values(providers).map((p: ToolProvider<unknown, unknown>) => p.close()));
    },
  };
}
