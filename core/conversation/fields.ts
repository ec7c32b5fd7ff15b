/* The chat-completions request fields, by how the core treats them (read by the config too). */

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
