import { SvcError } from '../errors';

/** The most an int32 field of the neutral form can carry. */
export const INT32_MAX = 2_147_483_647;

/** A range the core checks, with OpenAI's own codes and words. */
export interface ChatRange {
  readonly min: number;
  readonly max: number;
}

/** One chat-completions request field and everything the core does with it. */
export interface ChatField {
  /**
   * `typed`: a field of the neutral form (chat.proto) the core sets or validates itself; `extra`
   * cannot override it. `documented`: the rest of OpenAI's CreateChatCompletionRequest, carried
   * in `extra` and passed upstream verbatim (what it adds to the answer comes back verbatim).
   * `deprecated`: refused with `refusal`.
   */
  readonly kind: 'typed' | 'documented' | 'deprecated';
  /** A decimal the core range-checks (typed fields and `extra` alike). */
  readonly decimal?: ChatRange;
  /** An integer the core range-checks; 0 is "not set" in the neutral form, so adapters call `checkChatInteger` too. */
  readonly integer?: ChatRange;
  /**
   * What the native upstreams (Anthropic, OpenAI Responses) do with it: `hint` tunes only how
   * the upstream serves the call (dropped without a word where it has no counterpart); a
   * function says which values change the answer in a way neither can honour (refused with a
   * 400 naming the field, never silently dropped). Absent: translated or passed on.
   */
  readonly native?: 'hint' | ((value: unknown) => boolean);
  /** The refusal of a deprecated field. */
  readonly refusal?: string;
  /**
   * A typed decimal the core checks and forwards as is: its field in ChatCompletionParams
   * (chat.proto). The core reads it from there and sends it upstream under this entry's name.
   */
  readonly neutral?: 'temperature' | 'topP' | 'presencePenalty' | 'frequencyPenalty';
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const always = (): boolean => true;

/*
 * The chat-completions request fields: the one table the core checks against, the native
 * translators refuse or drop by, and the adapters and the config read (an adapter refuses only
 * what its wire encoding cannot carry). A new parameter is a line here; see docs/extending.md.
 */
export const CHAT_FIELDS: Readonly<Record<string, ChatField>> = {
  model: { kind: 'typed' },
  messages: { kind: 'typed' },
  stream: { kind: 'typed', native: 'hint' },
  stream_options: { kind: 'typed', native: 'hint' },
  max_tokens: { kind: 'typed', integer: { min: 1, max: INT32_MAX } },
  max_completion_tokens: { kind: 'typed', integer: { min: 1, max: INT32_MAX } },
  // OpenAI's own bound.
  n: { kind: 'typed', integer: { min: 1, max: 128 }, native: (v) => v !== 1 },
  tools: { kind: 'typed' },
  tool_choice: { kind: 'typed' },
  temperature: { kind: 'typed', decimal: { min: 0, max: 2 }, neutral: 'temperature' },
  top_p: { kind: 'typed', decimal: { min: 0, max: 1 }, neutral: 'topP' },
  stop: { kind: 'typed' },
  seed: { kind: 'typed', native: always },
  parallel_tool_calls: { kind: 'typed' },
  response_format: { kind: 'typed' },
  user: { kind: 'typed' },
  presence_penalty: {
    kind: 'typed',
    decimal: { min: -2, max: 2 },
    neutral: 'presencePenalty',
    native: (v) => v !== 0,
  },
  frequency_penalty: {
    kind: 'typed',
    decimal: { min: -2, max: 2 },
    neutral: 'frequencyPenalty',
    native: (v) => v !== 0,
  },

  audio: { kind: 'documented', native: always },
  logit_bias: { kind: 'documented', native: (v) => !(isObj(v) && Object.keys(v).length === 0) },
  logprobs: { kind: 'documented', native: (v) => v !== false },
  metadata: { kind: 'documented', native: 'hint' },
  modalities: { kind: 'documented', native: (v) => !(Array.isArray(v) && v.every((m) => m === 'text')) },
  moderation: { kind: 'documented' },
  prediction: { kind: 'documented', native: always },
  prompt_cache_key: { kind: 'documented', native: 'hint' },
  prompt_cache_options: { kind: 'documented' },
  prompt_cache_retention: { kind: 'documented', native: 'hint' },
  reasoning_effort: { kind: 'documented' },
  safety_identifier: { kind: 'documented', native: 'hint' },
  service_tier: { kind: 'documented', native: 'hint' },
  store: { kind: 'documented', native: 'hint' },
  top_logprobs: { kind: 'documented', native: always },
  verbosity: { kind: 'documented' },
  web_search_options: { kind: 'documented', native: always },

  // Documented but deprecated, and their answer (message.function_call) has no place here.
  functions: {
    kind: 'deprecated',
    refusal: "Unsupported parameter: 'functions' is deprecated and not supported here. Use 'tools' instead.",
  },
  function_call: {
    kind: 'deprecated',
    refusal: "Unsupported parameter: 'function_call' is deprecated and not supported here. Use 'tool_choice' instead.",
  },
};

const namesOf = (kind: ChatField['kind']): ReadonlySet<string> =>
  new Set(Object.entries(CHAT_FIELDS).flatMap(([name, field]) => (field.kind === kind ? [name] : [])));

/** Top-level fields the core sets or validates itself; `extra` cannot override them. */
export const RESERVED_CHAT_PARAMS: ReadonlySet<string> = namesOf('typed');

/** The rest of OpenAI's documented chat-completions request: passed to the upstream verbatim. */
export const DOCUMENTED_CHAT_PARAMS: ReadonlySet<string> = namesOf('documented');

/** Documented but deprecated: refused with these messages. */
export const DEPRECATED_CHAT_PARAMS: Readonly<Record<string, string>> = Object.fromEntries(
  Object.entries(CHAT_FIELDS).flatMap(([name, field]) => (field.refusal === undefined ? [] : [[name, field.refusal]])),
);

/** Serving hints the native upstreams drop where they have no counterpart. */
export const NATIVE_HINTS: ReadonlySet<string> = new Set(
  Object.entries(CHAT_FIELDS).flatMap(([name, field]) => (field.native === 'hint' ? [name] : [])),
);

/** Fields the native upstreams cannot honour, with the values that change the answer. */
export const NATIVE_UNSUPPORTED: Readonly<Record<string, (value: unknown) => boolean>> = Object.fromEntries(
  Object.entries(CHAT_FIELDS).flatMap(([name, field]) =>
    typeof field.native === 'function' ? [[name, field.native]] : [],
  ),
);

/** Whether a name may be allowed as a model's extra parameter (not one the core owns). */
export function isOwnChatParam(name: string): boolean {
  return RESERVED_CHAT_PARAMS.has(name) || DOCUMENTED_CHAT_PARAMS.has(name) || name in DEPRECATED_CHAT_PARAMS;
}

/**
 * Integer parameters and their bounds (from the table), checked by the core with OpenAI's own
 * errors. 0 stands for "not set" in the neutral form, so an adapter refuses a client's 0 itself
 * (and a value past int32) by calling `checkChatInteger` too: the same table, the same error.
 */
export const CHAT_INTEGER_BOUNDS: Readonly<Record<'max_tokens' | 'max_completion_tokens' | 'n', ChatRange>> = {
  max_tokens: rangeOf('max_tokens', 'integer'),
  max_completion_tokens: rangeOf('max_completion_tokens', 'integer'),
  n: rangeOf('n', 'integer'),
};

function rangeOf(param: string, type: 'integer' | 'decimal'): ChatRange {
  const range = CHAT_FIELDS[param]?.[type];
  if (range === undefined) throw new Error(`chat field ${param} has no ${type} range`);
  return range;
}

/** Throws OpenAI's `integer_below_min_value` / `integer_above_max_value` for `value` outside its bounds. */
export function checkChatInteger(param: keyof typeof CHAT_INTEGER_BOUNDS | string, value: number): void {
  const { min, max } = rangeOf(param, 'integer');
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

/**
 * Checks a decimal parameter against its range in the table, with OpenAI's own codes and
 * wording; a field without a decimal range is not checked here.
 */
export function checkChatDecimal(param: string, value: number | undefined): void {
  const range = CHAT_FIELDS[param]?.decimal;
  if (value === undefined || range === undefined) return;
  if (!Number.isFinite(value))
    throw new SvcError('invalid_type', `Invalid type for '${param}': expected a decimal.`, { param });
  if (value > range.max) {
    throw new SvcError(
      'decimal_above_max_value',
      `Invalid '${param}': decimal above maximum value. Expected a value <= ${range.max}, but got ${value} instead.`,
      { param },
    );
  }
  if (value < range.min) {
    throw new SvcError(
      'decimal_below_min_value',
      `Invalid '${param}': decimal below minimum value. Expected a value >= ${range.min}, but got ${value} instead.`,
      { param },
    );
  }
}

/**
 * Checks a value the neutral form carries in `extra` against the table's range for it, if the
 * table gives one: a documented parameter with a range is checked by adding the range, nothing
 * else. A value of the wrong JSON type is refused as OpenAI refuses it.
 */
export function checkChatExtra(param: string, value: unknown): void {
  const field = CHAT_FIELDS[param];
  if (field?.decimal !== undefined) {
    if (typeof value !== 'number')
      throw new SvcError('invalid_type', `Invalid type for '${param}': expected a decimal.`, { param });
    checkChatDecimal(param, value);
  }
  if (field?.integer !== undefined) {
    if (typeof value !== 'number' || !Number.isInteger(value))
      throw new SvcError('invalid_type', `Invalid type for '${param}': expected an integer.`, { param });
    checkChatInteger(param, value);
  }
}
