import type { ModelConfig, OutputLimitField } from '../config/types';
import { invalidArgument, SvcError } from '../errors';
import { estimatePromptTokens, promptBound, type PromptBound } from '../providers/llm/tokens';
import type { ChatProvider, JsonObject, WireChatBody, WireChatRequest, WireTool } from '../providers/llm/types';

/** A validated request, ready for the meter and the provider. */
export interface PreparedChat {
  readonly model: ModelConfig;
  readonly provider: ChatProvider;
  /** The upstream body (upstream model name; the output limit only where the client set one). */
  readonly request: WireChatRequest;
  /**
   * The output-token limit of one choice: the client's (capped by the model maximum), sent
   * upstream, or when the client set none the model maximum, which bounds the hold but is not sent.
   */
  readonly outputLimit: number;
  /** Choices asked for (`n`, default 1): each may use the whole output limit. */
  readonly choices: number;
  /**
   * An upper bound of the prompt tokens, for the hold: counted only when asked for (after the
   * wallet was checked for the least the call can cost, see runner.ts).
   */
  readonly inputUpperBound: PromptBound;
  /**
   * Whether the client set the output limit. A limit svc chose (none set) may be fitted to what
   * the wallet can pay (core/chat/runner.ts); a client's limit the credit cannot cover is refused.
   */
  readonly clientLimit: boolean;
  /** The output limit's name in the client's wire, for messages (`max_tokens`, `maxOutputTokens`, …). */
  readonly limitName: string;
  /**
   * Set when the client's output limit was above the model's maximum and the maximum went upstream
   * instead (SPEC §7d: fitted, not refused); the adapters say so in `x-svc-fitted`.
   */
  readonly fitted?: FittedLimit | undefined;
}

/** An output limit svc lowered to the model's maximum: the client's field, its value, what was sent. */
export interface FittedLimit {
  readonly field: string;
  readonly requested: number;
  readonly sent: number;
}

/** The `x-svc-fitted` header's value: `max_tokens=32000->8192`. */
export function fittedHeader(fitted: FittedLimit): string {
  return `${fitted.field}=${fitted.requested}->${fitted.sent}`;
}

/**
 * The call with output limit `limit` (below the current one) sent upstream: a limit svc chose
 * goes as `max_tokens`, which each provider renames to its upstream's `max_tokens_field`.
 */
export function withOutputLimit(prepared: PreparedChat, limit: number): PreparedChat {
  const request: WireChatRequest = { ...prepared.request };
  if (request.max_completion_tokens !== undefined) request.max_completion_tokens = limit;
  else request.max_tokens = limit;
  return { ...prepared, request, outputLimit: limit };
}

/** The function names chat upstreams accept. */
export const TOOL_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks a number parameter's range; `param` is the client's own field name. */
export function checkRange(value: number | undefined, min: number, max: number, param: string): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < min || value > max) {
    throw invalidArgument(param, `Invalid '${param}': expected a number between ${min} and ${max}, got ${value}.`);
  }
}

/** Checks function tools; `paramOf(i, field)` names a field in the client's own format. */
export function checkTools(
  tools: readonly WireTool[],
  paramOf: (index: number, field: 'name' | 'parameters') => string,
): void {
  const seen = new Set<string>();
  tools.forEach((tool, i) => {
    const name = tool.function.name;
    if (!TOOL_NAME_RE.test(name)) {
      throw invalidArgument(
        paramOf(i, 'name'),
        `Invalid '${paramOf(i, 'name')}': '${name}' must be 1-64 characters of a-z, A-Z, 0-9, underscores and dashes.`,
      );
    }
    if (seen.has(name))
      throw invalidArgument(paramOf(i, 'name'), `Invalid '${paramOf(i, 'name')}': duplicate function name '${name}'.`);
    seen.add(name);
    const params = tool.function.parameters;
    if (params !== undefined && params['type'] !== undefined && params['type'] !== 'object') {
      throw invalidArgument(
        paramOf(i, 'parameters'),
        `Invalid schema for function '${name}': schema must be a JSON Schema of 'type: "object"', got 'type: ${JSON.stringify(params['type'])}'.`,
      );
    }
  });
}

/** Checks a tool choice against the tools; returns it in chat-completions form. */
export function checkToolChoice(
  choice: string | JsonObject | undefined,
  tools: readonly WireTool[],
  param: string,
): string | JsonObject | undefined {
  if (choice === undefined) return undefined;
  if (typeof choice === 'string') {
    if (choice !== 'none' && choice !== 'auto' && choice !== 'required') {
      throw invalidArgument(
        param,
        `Invalid '${param}': expected 'none', 'auto', 'required' or a function, got '${choice}'.`,
      );
    }
    if (choice === 'required' && tools.length === 0)
      throw invalidArgument(param, `Invalid '${param}': 'required' needs at least one tool.`);
    return choice;
  }
  const fn = choice['function'] as JsonObject | undefined;
  const name = fn?.['name'];
  if (typeof name !== 'string' || !tools.some((t) => t.function.name === name)) {
    throw invalidArgument(param, `Invalid '${param}': function '${String(name)}' is not among the tools.`);
  }
  return choice;
}

/**
 * `{ ...body, model }` without the client's output limits (`max_tokens`, `max_completion_tokens`),
 * the keys in the same order, built key by key: an object spread followed by a key the source
 * lacks (as the output limit set after it) makes V8's optimised code give each object a map (hidden
 * class) of its own, about 0.5 KiB in the old generation per call (docs/performance.md, "Memory,
 * round five").
 */
function upstreamRequest(body: WireChatBody, upstreamModel: string): WireChatRequest {
  const request: Record<string, unknown> = {};
  const source = body as Readonly<Record<string, unknown>>;
  for (const key of Object.keys(source)) {
    if (key === 'max_tokens' || key === 'max_completion_tokens') continue;
    // As the spread does: an own `__proto__` key of a parsed body stays a key.
    if (key === '__proto__')
      Object.defineProperty(request, key, { value: source[key], enumerable: true, writable: true, configurable: true });
    else request[key] = source[key];
  }
  request['model'] = upstreamModel;
  return request as unknown as WireChatRequest;
}

/**
 * Completes a validated upstream body: the upstream model name and the output limit, plus the
 * bounds for the hold. A limit the client set (`requestedMax` > 0) goes upstream capped by the
 * model's maximum, under the field the client used (`clientField`; each upstream's provider
 * renames it to the upstream's `max_tokens_field`); a client that set none sends none, since reasoning models reject or misuse a
 * limit nobody asked for, and the hold is then bounded by the model's `max_output_tokens`. A limit
 * above the model's maximum is fitted to it on every wire (SPEC §7d: clients such as Qwen Code send
 * a generic 32000 for a model they do not know) and reported in `fitted`.
 */
export function prepareChat(
  model: ModelConfig,
  provider: ChatProvider,
  body: WireChatBody,
  requestedMax: number,
  maxParam: string,
  clientField: OutputLimitField = 'max_tokens',
  limitName: string = maxParam,
): PreparedChat {
  if (!Number.isInteger(requestedMax) || requestedMax < 0) {
    throw invalidArgument(maxParam, `Invalid '${maxParam}': expected a non-negative integer, got ${requestedMax}.`);
  }
  const outputLimit = requestedMax === 0 ? model.maxOutputTokens : Math.min(requestedMax, model.maxOutputTokens);
  const request = upstreamRequest(body, model.upstreamModel);
  // Each upstream's provider renames the field to its own `max_tokens_field` where it has one.
  if (requestedMax > 0) request[clientField] = outputLimit;
  const n = body['n'];
  const choices = typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
  const estimate = estimatePromptTokens(request.messages, request.tools ?? []);
  if (estimate >= model.contextWindow) {
    throw new SvcError(
      'context_length_exceeded',
      `The input is about ${estimate} tokens, more than the ${model.contextWindow}-token context window of '${model.id}'.`,
      { param: 'messages' },
    );
  }
  return {
    model,
    provider,
    request,
    outputLimit,
    choices,
    inputUpperBound: promptBound(request.messages, request.tools ?? []),
    clientLimit: requestedMax > 0,
    limitName,
    ...(requestedMax > model.maxOutputTokens
      ? { fitted: { field: limitName, requested: requestedMax, sent: model.maxOutputTokens } }
      : {}),
  };
}
