import { SvcError } from '../errors';

/*
 * The chat-completions request fields, by how the core treats them: the one table the core
 * checks against and the adapters and the config read (an adapter refuses only what its wire
 * encoding cannot carry).
 */

/** Top-level fields the core sets or validates itself; `extra` cannot override them. */
export const RESERVED_CHAT_PARAMS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'stream',
  'stream_options',
  'max_tokens',
  'max_completion_tokens',
  'n',
  'tools',
  'tool_choice',
  'temperature',
  'top_p',
  'stop',
  'seed',
  'parallel_tool_calls',
  'response_format',
  'user',
  'presence_penalty',
  'frequency_penalty',
]);

/**
 * The rest of OpenAI's documented chat-completions request (CreateChatCompletionRequest): passed
 * to the upstream verbatim, and what they add to the answer (logprobs, annotations, audio,
 * service_tier, usage details) comes back verbatim too.
 */
export const DOCUMENTED_CHAT_PARAMS: ReadonlySet<string> = new Set([
  'audio',
  'logit_bias',
  'logprobs',
  'metadata',
  'modalities',
  'moderation',
  'prediction',
  'prompt_cache_key',
  'prompt_cache_options',
  'prompt_cache_retention',
  'reasoning_effort',
  'safety_identifier',
  'service_tier',
  'store',
  'top_logprobs',
  'verbosity',
  'web_search_options',
]);

/** Documented but deprecated, and their answer (message.function_call) has no place here: refused. */
export const DEPRECATED_CHAT_PARAMS: Readonly<Record<string, string>> = {
  functions: "Unsupported parameter: 'functions' is deprecated and not supported here. Use 'tools' instead.",
  function_call:
    "Unsupported parameter: 'function_call' is deprecated and not supported here. Use 'tool_choice' instead.",
};

/** Whether a name may be allowed as a model's extra parameter (not one the core owns). */
export function isOwnChatParam(name: string): boolean {
  return RESERVED_CHAT_PARAMS.has(name) || DOCUMENTED_CHAT_PARAMS.has(name) || name in DEPRECATED_CHAT_PARAMS;
}

/** The most an int32 field of the neutral form can carry. */
export const INT32_MAX = 2_147_483_647;

/**
 * Integer parameters and their bounds, checked by the core with OpenAI's own errors. 0 stands
 * for "not set" in the neutral form, so an adapter refuses a client's 0 itself (and a value past
 * int32) by calling `checkChatInteger` too: the same table, the same error.
 */
export const CHAT_INTEGER_BOUNDS: Readonly<
  Record<'max_tokens' | 'max_completion_tokens' | 'n', { min: number; max: number }>
> = {
  max_tokens: { min: 1, max: INT32_MAX },
  max_completion_tokens: { min: 1, max: INT32_MAX },
  // OpenAI's own bound.
  n: { min: 1, max: 128 },
};

/** Throws OpenAI's `integer_below_min_value` / `integer_above_max_value` for `value` outside its bounds. */
export function checkChatInteger(param: keyof typeof CHAT_INTEGER_BOUNDS, value: number): void {
  const { min, max } = CHAT_INTEGER_BOUNDS[param];
  if (value < min)
    throw new SvcError(
      'integer_below_min_value',
      `Invalid '${param}': integer below minimum value. Expected a value >= ${min}, but got ${value} instead.`,
      { param },
    );
  if (value > max)
    throw new SvcError(
      'integer_above_max_value',
      `Invalid '${param}': integer above maximum value. Expected a value <= ${max}, but got ${value} instead.`,
      { param },
    );
}
