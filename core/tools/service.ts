import { didYouMean } from '../text/suggest';
import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Principal } from '../auth/types';
import type { BillingResult, Meter } from '../billing/types';
import { isSvcError, SvcError } from '../errors';
import type { WalletService } from '../wallet/types';
import { sandboxConfig, TOOL_SPECS } from './catalog';
import { definitionOf, type ToolDefinitionSpec, type ToolSpec } from './definitions';
import { createToolProviders } from './registry';
import type { ProviderResult, ToolConfig, ToolHttp, ToolPrice, ToolProvider } from './types';

/**
 * What the tool service needs of the composition root (a subset of CoreDeps, declared here so
 * that the config loader may read the tool list without a cycle through core/deps).
 */
export interface ToolDeps {
  readonly config: { readonly tools: ReadonlyMap<string, ToolConfig> };
  readonly meter: Meter;
  readonly logger: Logger;
  readonly now: () => number;
  /** Lets a token-billed call hold what the wallet has free; absent: the whole cap. */
  readonly wallet?: Pick<WalletService, 'get'>;
  /** The core's one upstream dispatcher (its owner closes it). */
  readonly http: ToolHttp;
}

/** One tool as listed: its definition, its price and who serves it. */
export interface ListedTool {
  readonly definition: ToolDefinitionSpec;
  readonly price: ToolPrice;
  readonly provider: string;
}

/** Facts about a refusal for machines: wallet and cap numbers, the argument at fault. */
export type ToolErrorDetails = Readonly<Record<string, string | number>>;

/**
 * The outcome of one call. Bad arguments, a refusal for credit or for the key's cap and a
 * provider failure are results (`isError`, a stable `errorCode`, `details`), not exceptions, so
 * every caller shows the model the same words; nothing was charged for any of them.
 */
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
      /** Words a model can act on, ending with what to do next. */
      readonly text: string;
      readonly errorCode: string;
      readonly details: ToolErrorDetails;
      readonly billing: undefined;
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
  /**
   * The meter of an agent loop's budget (core/chat/budget.ts) when the call is a step of one:
   * its hold is the tool's whole price (the loop's hold already covers it); absent: the wallet's.
   */
  readonly meter?: Meter | undefined;
}

export interface ToolService {
  list(): readonly ListedTool[];
  /**
   * Validates, holds the price, calls the provider and settles. Bad arguments, refusals and
   * provider failures are `isError` outcomes; only an unknown tool (tool_not_found) and a
   * cancelled call throw.
   */
  call(call: ToolCall): Promise<ToolCallOutcome>;
}

interface Runnable {
  readonly spec: ToolSpec;
  readonly config: ToolConfig;
  readonly definition: ToolDefinitionSpec;
  readonly price: ToolPrice;
  readonly provider: ToolProvider<unknown, unknown>;
}

const SANDBOX_NOTICE =
  'Sandbox data: sample results from the offline dataset bundled with svc, not live search results.';

function numberOf(details: Readonly<Record<string, unknown>> | undefined, key: string): number | undefined {
  const value = details?.[key];
  return typeof value === 'number' ? value : undefined;
}

/** Keeps the entries whose value is defined, renamed: the details a refusal carries. */
function pick(
  details: Readonly<Record<string, unknown>> | undefined,
  names: Readonly<Record<string, string>>,
): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [from, to] of Object.entries(names)) {
    const value = details?.[from];
    if (typeof value === 'number' || typeof value === 'string') out[to] = value;
  }
  return out;
}

/**
 * A refused or failed call as the outcome every caller shows: words a model can act on (what
 * went wrong, that nothing was charged, what to do), a stable code and the machine-readable facts.
 */
export function toolRefusal(
  tool: string,
  error: SvcError,
  provider: string,
): Extract<ToolCallOutcome, { isError: true }> {
  const d = error.details;
  let text: string;
  let details: Record<string, string | number> = {};
  switch (error.code) {
    case 'invalid_argument':
      text = `${error.message}. Nothing was charged; fix the arguments and call again.`;
      details = error.param !== undefined ? { param: error.param } : {};
      break;
    case 'insufficient_credit': {
      const balance = numberOf(d, 'balance');
      const held = numberOf(d, 'held');
      const available = numberOf(d, 'available') ?? balance;
      const price = numberOf(d, 'required');
      text =
        `Insufficient credit: ${tool} needs ${price ?? 'more'} credits, but the wallet has ${available ?? 'too few'} available` +
        (balance !== undefined
          ? ` (balance ${balance}${held !== undefined && held > 0 ? `, ${held} held by calls in progress` : ''})`
          : '') +
        '. Nothing was charged. Ask the account owner to top up the wallet, then retry.';
      details = pick(d, { balance: 'balance', held: 'held', available: 'available', required: 'price' });
      break;
    }
    case 'key_cap_exceeded':
      text = `${error.message}. Nothing was charged. Ask the account owner to raise the key's cap.`;
      details = pick(d, {
        limit: 'cap_limit',
        cap: 'cap',
        spent: 'cap_spent',
        held: 'cap_held',
        required: 'price',
        resets_at: 'cap_resets_at',
      });
      break;
    default:
      // Provider failures: the message already says what to do; the operator detail stays in the log.
      text = `${error.message}. Nothing was charged.`;
  }
  return { isError: true, text, errorCode: error.code, details, billing: undefined, provider };
}

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

export function createToolService(deps: ToolDeps): ToolService {
  const providers = createToolProviders(deps.config.tools, deps.http);

  const runnables = new Map<string, Runnable>();
  for (const spec of TOOL_SPECS) {
    const config = deps.config.tools.get(spec.name) ?? sandboxConfig(spec);
    const provider = providers.get(spec.name);
    if (provider === undefined) throw new Error(`tools.${spec.name}: no provider`);
    runnables.set(spec.name, { spec, config, definition: definitionOf(spec), price: config.price, provider });
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
        `Unknown tool "${request.name}"; available tools: ${[...runnables.keys()].join(', ')}.${didYouMean(
          request.name,
          runnables.keys(),
          '"',
        )}`,
        { param: 'name' },
      );
    }
    const provider = tool.provider.name;
    const name = tool.definition.name;
    let args: unknown;
    try {
      args = tool.spec.parse(request.arguments ?? {});
    } catch (error) {
      if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
      return toolRefusal(name, error, provider);
    }
    // Cost and balance go on the span in the meter; the tool and its upstream go here.
    const span = trace.getActiveSpan();
    span?.setAttributes({ 'svc.tool.name': name, 'svc.tool.provider': provider });
    let metered: Awaited<ReturnType<typeof deps.meter.begin>>;
    let hold: bigint;
    try {
      hold = request.meter === undefined ? await holdAmount(tool.price, request.principal.accountId) : holdFor(tool.price);
      metered = await (request.meter ?? deps.meter).begin({
        principal: request.principal,
        requestId: request.requestId,
        clientRequestId: request.clientRequestId,
        kind: 'tool',
        resource: name,
        provider,
        maxCost: hold,
      });
    } catch (error) {
      if (isSvcError(error) && (error.code === 'insufficient_credit' || error.code === 'key_cap_exceeded'))
        return toolRefusal(name, error, provider);
      throw error;
    }
    const timeoutMs = tool.config.timeoutMs;
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
          provider,
          errorCode: code,
          detail,
          timeoutMs,
          elapsedMs: deps.now() - started,
        },
        'tool provider failed',
      );
      span?.recordException(error instanceof Error && error.cause instanceof Error ? error.cause : new Error(detail));
      if (!isSvcError(error) || code === 'cancelled') throw error;
      return toolRefusal(name, error, provider);
    }

    const items = tool.spec.refine?.(result.items, args, { now: deps.now() }) ?? result.items;
    const empty = items.length === 0;
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
    const query = (args as { query: string }).query;
    const notices: string[] = [];
    if (tool.provider.sandbox) notices.push(SANDBOX_NOTICE);
    if (result.unapplied !== undefined && result.unapplied.length > 0)
      notices.push(
        `The ${provider} provider cannot apply ${result.unapplied.map((a) => `"${a}"`).join(', ')}; ` +
          'these results are not filtered by it.',
      );
    if (empty)
      notices.push(
        result.items.length > 0
          ? `Nothing was found for "${query}" that passes the filters given. Try wider filters; this search cost nothing.`
          : `Nothing was found for "${query}". Try other or fewer words; this search cost nothing.`,
      );
    const structuredContent: Record<string, unknown> = {
      query,
      provider,
      sandbox: tool.provider.sandbox,
      ...(notices.length > 0 ? { notice: notices.join(' ') } : {}),
      ...(tool.spec.extra?.(args) ?? {}),
      results: items,
    };
    return { isError: false, structuredContent, text: JSON.stringify(structuredContent), billing, provider };
  }

  return {
    list: () => listed,
    call,
  };
}
