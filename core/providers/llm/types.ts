/**
 * The chat-completions wire shapes the core exchanges with its LLM providers. They are OpenAI's
 * own field names, because every supported upstream speaks that format; the core translates them
 * to and from protobuf and the Responses API.
 */

export type JsonObject = Record<string, unknown>;

export type WireRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface WireToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A content part, verbatim (`{type: "text", text}`, `{type: "image_url", image_url}`, …). */
export type WireContentPart = JsonObject & { type: string };

export interface WireMessage {
  role: WireRole;
  content?: string | WireContentPart[] | null;
  name?: string;
  tool_calls?: WireToolCall[];
  tool_call_id?: string;
  refusal?: string | null;
}

export interface WireTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonObject; strict?: boolean };
}

/**
 * A chat-completions request body without the model. `stream` and
 * `stream_options` are set by the provider, never by the caller.
 */
export interface WireChatBody {
  messages: WireMessage[];
  max_tokens?: number;
  max_completion_tokens?: number;
  tools?: WireTool[];
  tool_choice?: string | JsonObject;
  [param: string]: unknown;
}

/** A body plus the upstream's model name. */
export interface WireChatRequest extends WireChatBody {
  model: string;
}

/**
 * Usage by one convention every provider fills (SPEC §6): `prompt_tokens` counts every input
 * token, of which `prompt_tokens_details.cached_tokens` were cache reads and
 * `prompt_tokens_details.cache_write_tokens` cache writes (Anthropic's cache_creation_input_tokens),
 * `cache_write_1h_tokens` the one-hour writes among those (the rest are five-minute writes);
 * reasoning tokens are inside `completion_tokens`.
 */
export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /**
   * `cached_tokens`: the prompt tokens read from the upstream's cache; `cache_write_tokens`: those
   * written to it (Anthropic's `cache_creation_input_tokens`). Both are part of `prompt_tokens`.
   * `cache_write_1h_tokens`: the one-hour writes among `cache_write_tokens` (Anthropic's
   * `cache_creation.ephemeral_1h_input_tokens`).
   */
  prompt_tokens_details?: { cached_tokens: number; cache_write_tokens?: number; cache_write_1h_tokens?: number };
  completion_tokens_details?: { reasoning_tokens: number };
  /**
   * The upstream reported no usage: these are svc's own count (`estimateUsage`), charged as such
   * and shown to the client as `usage.estimated: true` (SPEC §6).
   */
  estimated?: boolean;
}

export interface WireChoice {
  index: number;
  message: {
    role: 'assistant';
    content: string | null;
    tool_calls?: WireToolCall[];
    refusal?: string | null;
    annotations?: JsonObject[];
    audio?: JsonObject;
    /** The reasoning text of a reasoning model (`reasoning_content`, or `reasoning` on some servers). */
    reasoning_content?: string;
  };
  finish_reason: string;
  logprobs?: JsonObject;
}

export interface WireCompletion {
  id: string;
  created: number;
  model: string;
  choices: WireChoice[];
  usage: WireUsage;
  system_fingerprint?: string;
  service_tier?: string;
  /** A native pass-through's answer in the upstream's own wire (svc's model id in it). */
  native?: JsonObject;
  /** `native`'s JSON text as the upstream wrote it, when `native` is that answer unchanged (the fast path edits it). */
  nativeText?: string;
}

export interface WireToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface WireChunkChoice {
  index: number;
  delta: {
    role?: string;
    content?: string | null;
    tool_calls?: WireToolCallDelta[];
    refusal?: string | null;
    reasoning_content?: string;
  };
  finish_reason: string | null;
  logprobs?: JsonObject;
}

export interface WireChunk {
  id: string;
  created: number;
  model: string;
  choices: WireChunkChoice[];
  usage?: WireUsage | null;
  system_fingerprint?: string;
  service_tier?: string;
  /** A native pass-through's own stream events behind this chunk, in order (svc's model id in them). */
  native?: JsonObject[];
  /**
   * The upstream's count of the prompt, as soon as it gave one before the end (Anthropic's
   * `message_start`, Gemini's running `usageMetadata`): its input tokens and cache split, no
   * output. Never sent to a client: what a caller that leaves before the final usage pays for
   * its prompt (SPEC §6: leaving never costs more than finishing).
   */
  prompt?: WireUsage;
}

/** The client wires a provider can take verbatim (native pass-through). */
export type NativeWire = 'anthropic' | 'openai-responses' | 'gemini';

/**
 * Native pass-through (the fidelity path): the client's own request body in the upstream's wire,
 * forwarded with only the model and `request`'s output limit (both svc's decisions) replaced.
 * Answers carry the upstream's JSON (`native`) beside the chat form, which holds the usage the
 * call is billed from; failures are mapped as for `complete` / `stream`.
 */
export interface NativeCalls {
  readonly wire: NativeWire;
  /** `headers`: the client's own headers for this wire, already allow-listed by its adapter. */
  complete(
    body: JsonObject,
    request: WireChatRequest,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): Promise<WireCompletion>;
  stream(
    body: JsonObject,
    request: WireChatRequest,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): AsyncIterable<WireChunk>;
  /**
   * The fast path of this wire's stream (core/chat/fast-path.ts), where the provider has one: the
   * body goes upstream exactly as `stream` sends it, and the upstream's events come back as its
   * own JSON text (svc's model id in place), read on the way exactly as `stream` reads them (the
   * same errors, cuts and usage). Present on `anthropic`, `gemini` and `openai-responses`.
   */
  passThrough?(
    body: JsonObject,
    request: WireChatRequest,
    signal: AbortSignal,
    headers?: Readonly<Record<string, string>>,
  ): AsyncIterable<PassThroughBatch>;
  /**
   * Present when the upstream compacts itself (an `openai-responses` upstream with `compaction:
   * native`; SPEC §7d): it then also takes a final `compaction_trigger` and its own `compaction`
   * items through `complete` / `stream`. `compact` is `POST /responses/compact` with the client's
   * body (svc's model): the answer's `native` is the upstream's `response.compaction` object.
   */
  readonly compact?: (body: JsonObject, request: WireChatRequest, signal: AbortSignal) => Promise<WireCompletion>;
}

/**
 * What a pass-through stream (the fast path, core/chat/fast-path.ts) yields per read of the
 * upstream's body: its chunks with choices, in order, and what svc needs of them.
 */
export interface PassThroughBatch {
  /**
   * Each chunk either as JSON text to be forwarded as it is (the upstream's bytes, svc's model id
   * in place of the upstream's), or, for a chunk the provider had to normalise (an upstream's
   * quirk the translation smooths over), as the chunk the translated path would carry.
   */
  readonly chunks: readonly (string | WireChunk)[];
  /**
   * For a wire that names its SSE events (Anthropic): the event name of each of `chunks`, in
   * order (only strings, then). Absent for OpenAI chat, whose frames have no name.
   */
  readonly events?: readonly string[];
  /**
   * On the stream's last batch only, for a wire whose stream ends in an event of its own after the
   * usage (Anthropic's `message_stop`): that event as the upstream wrote it, which the client gets
   * only once the charge is settled (with the final message), never before.
   */
  readonly closing?: { readonly event: string; readonly data: string };
  /** The output text these chunks carry (content, refusal, reasoning, tool names and arguments). */
  readonly text: string;
  /** The last of these chunks' header (id, created, fingerprint, tier), for the final usage chunk. */
  readonly last?: Pick<WireChunk, 'id' | 'created' | 'system_fingerprint' | 'service_tier'> | undefined;
  /**
   * On the stream's last batch only: the upstream's usage, or svc's own count (`estimated`) when
   * it sent none. A stream that ends without it was cut.
   */
  readonly usage?: WireUsage;
  /** The upstream's count of the prompt before the end, as `WireChunk.prompt`. */
  readonly prompt?: WireUsage;
  /**
   * Whether these chunks carry a finish reason while the usage is still to come in a chunk of its
   * own (OpenAI chat): the runner holds them until it came, so a caller that stops at the finish
   * reason is charged as one that finished.
   */
  readonly ends?: boolean;
}

/**
 * A non-stream answer on the fast path: the upstream's JSON text, svc's model id in it, in two
 * pieces around its usage (the client's body is `data[0]`, svc's usage, `data[1]`), and the usage
 * read from it (svc's own count, `estimated`, when it had none) exactly as `complete` reads it.
 */
export interface PassThroughCompletion {
  readonly data: readonly [string, string];
  readonly usage: WireUsage;
}

/**
 * The fast path of a provider whose upstream speaks the client's wire (OpenAI chat completions;
 * a native wire's through `NativeCalls.passThrough`):
 * `request` goes upstream exactly as `stream` (`complete`) sends it, and the answer comes back as
 * the upstream's own chunks (JSON text). Failures, cuts and usage are read exactly as by `stream`
 * (`complete`).
 */
export interface PassThroughCalls {
  /**
   * The client wire whose stream this passes through: `openai` (chat completions), or a native
   * wire, whose pass-through carries the client's own body (core/chat/native.ts).
   */
  readonly wire: 'openai' | NativeWire;
  /** `includeUsage`: whether the client asked for `usage` (`usage: null` is stripped otherwise). */
  stream(request: WireChatRequest, includeUsage: boolean, signal: AbortSignal): AsyncIterable<PassThroughBatch>;
  /**
   * A non-stream call (OpenAI chat completions only): the answer as it came, or, where it needs
   * the translation's normalising, the completion `complete` returns.
   */
  readonly complete?: (
    request: WireChatRequest,
    signal: AbortSignal,
  ) => Promise<PassThroughCompletion | WireCompletion>;
}

/**
 * One upstream LLM. Both calls abort the upstream HTTP request when `signal` fires. Failures are
 * SvcError `upstream_error` / `upstream_unavailable` / `upstream_timeout` (detail in `cause`).
 * `stream` ends with one usage chunk (`choices: []`). SPEC §6 bills from the upstream's usage; an
 * upstream that reports none (several self-hosted servers omit it, some only when streaming) is
 * served, and every provider fills the usage with svc's own count (`estimateUsage`, marked
 * `estimated`), never throwing the answer away for it.
 */
export interface ChatProvider {
  /** "openai", "anthropic", "openai-responses" or "sandbox", for usage records and logs. */
  readonly name: string;
  complete(request: WireChatRequest, signal: AbortSignal): Promise<WireCompletion>;
  stream(request: WireChatRequest, signal: AbortSignal): AsyncIterable<WireChunk>;
  /** Present on providers whose upstream wire a client may also speak. */
  readonly native?: NativeCalls;
  /** Present on providers that serve the fast path of the OpenAI chat wire (`openai`). */
  readonly passThrough?: PassThroughCalls;
}
