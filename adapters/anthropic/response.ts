import type { ChatCompletion, ChatCompletionChunk, Usage } from '../../gen/svc/core/v1/chat';
import type { Model } from '../../gen/svc/core/v1/models';

/* The core's chat answers → Anthropic Messages JSON and stream events. */

type Obj = Record<string, unknown>;

const STOP_REASONS: Record<string, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal',
};

/**
 * Anthropic's stop reason for a chat finish reason. A chat upstream does not say which stop
 * sequence ended the text, so a stop is always `end_turn` (with `stop_sequence: null`).
 */
export function stopReason(finish: string): string {
  return STOP_REASONS[finish] ?? 'end_turn';
}

/** Anthropic's id for a chat completion id. */
export function messageId(id: string): string {
  return id.startsWith('msg_') ? id : `msg_${id.replace(/^chatcmpl-/, '')}`;
}

/**
 * Anthropic counts cache reads and writes apart from `input_tokens`; chat's `prompt_tokens`
 * includes them. The writes are split by tier (SPEC §13): `written1h` of them one-hour writes, the
 * rest five-minute writes.
 */
function tokens(usage: Usage | undefined): {
  input: number;
  cached: number;
  written: number;
  written1h: number;
  output: number;
} {
  if (usage === undefined) return { input: 0, cached: 0, written: 0, written1h: 0, output: 0 };
  const cached = Number(usage.cachedTokens);
  const written = Number(usage.cacheWriteTokens);
  return {
    input: Number(usage.promptTokens) - cached - written,
    cached,
    written,
    written1h: Math.min(written, Number(usage.cacheWrite1hTokens)),
    output: Number(usage.completionTokens),
  };
}

/** The cache-write tiers as Anthropic's `cache_creation` object. */
function cacheCreation(t: ReturnType<typeof tokens>): Obj {
  return { ephemeral_5m_input_tokens: t.written - t.written1h, ephemeral_1h_input_tokens: t.written1h };
}

function usageJson(usage: Usage | undefined): Obj {
  const t = tokens(usage);
  return {
    input_tokens: t.input,
    output_tokens: t.output,
    cache_creation_input_tokens: t.written,
    cache_read_input_tokens: t.cached,
    cache_creation: cacheCreation(t),
    inference_geo: null,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: 'standard',
    speed: null,
    // The upstream reported no usage: svc's own count (an extra field the SDKs carry through).
    ...(usage?.estimated === true ? { estimated: true } : {}),
  };
}

/** The arguments a model produced, as the object `tool_use.input` must be (`{}` when not JSON). */
function toolInput(args: string): unknown {
  try {
    const value = JSON.parse(args === '' ? '{}' : args) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : { value };
  } catch {
    return {};
  }
}

function baseMessage(id: string, model: string): Obj {
  return {
    id: messageId(id),
    type: 'message',
    role: 'assistant',
    model,
    content: [] as Obj[],
    stop_reason: null,
    stop_sequence: null,
    stop_details: null,
    container: null,
    diagnostics: null,
  };
}

/** A non-stream answer: text first, then the tool calls, as Anthropic orders them. */
export function messageJson(c: ChatCompletion): Obj {
  const choice = c.choices[0];
  const m = choice?.message;
  const content: Obj[] = [];
  // The upstream's reasoning as a thinking block; svc signs nothing (Anthropic's signature only
  // lets its own API verify the block when it comes back, and svc does not send it back).
  if (m?.reasoningContent !== undefined && m.reasoningContent !== '')
    content.push({ type: 'thinking', thinking: m.reasoningContent, signature: '' });
  const text = m?.content ?? m?.refusal;
  if (text !== undefined && text !== '') content.push({ type: 'text', text, citations: null });
  for (const call of m?.toolCalls ?? []) {
    content.push({
      type: 'tool_use',
      id: call.id,
      name: call.function?.name ?? '',
      input: toolInput(call.function?.arguments ?? ''),
      caller: { type: 'direct' },
    });
  }
  return {
    ...baseMessage(c.id, c.model),
    content,
    stop_reason: stopReason(choice?.finishReason ?? 'stop'),
    usage: usageJson(c.usage),
  };
}

/** An Anthropic stream event: its name and its JSON. */
export interface StreamEvent {
  readonly event: string;
  readonly data: Obj;
}

/**
 * Turns the core's chat chunks into Anthropic's event sequence: `message_start`, `ping`, then
 * per content block `content_block_start`, its deltas (`thinking_delta`, `text_delta`,
 * `input_json_delta`) and
 * `content_block_stop`, and at the end `message_delta` (stop reason and usage, the input tokens
 * included: they are only known at the end) and `message_stop`.
 */
export class MessageStream {
  private started = false;
  private index = -1;
  private open: { kind: 'text' } | { kind: 'thinking' } | { kind: 'tool'; toolIndex: number } | undefined;
  private finish = '';
  private usage: Usage | undefined;

  constructor(private readonly model: string) {}

  /** The events for one chunk. */
  chunk(c: ChatCompletionChunk): StreamEvent[] {
    const out: StreamEvent[] = [];
    if (c.usage !== undefined) this.usage = c.usage;
    if (!this.started) {
      this.started = true;
      // The usage as far as the first chunk says it (Gemini's running usageMetadata has the prompt
      // and its cache reads); a chat upstream's comes at the end: zeros, then message_delta.
      const message = { ...baseMessage(c.id, c.model || this.model), usage: usageJson(this.usage) };
      out.push({ event: 'message_start', data: { type: 'message_start', message } });
      out.push({ event: 'ping', data: { type: 'ping' } });
    }
    const choice = c.choices.find((ch) => ch.index === 0);
    if (choice === undefined) return out;
    const d = choice.delta;
    const thinking = d?.reasoningContent;
    if (thinking !== undefined && thinking !== '') {
      if (this.open?.kind !== 'thinking')
        out.push(...this.startBlock({ type: 'thinking', thinking: '', signature: '' }));
      this.open = { kind: 'thinking' };
      out.push(this.delta({ type: 'thinking_delta', thinking }));
    }
    const text = d?.content ?? d?.refusal;
    if (text !== undefined && text !== '') {
      if (this.open?.kind !== 'text') out.push(...this.startBlock({ type: 'text', text: '', citations: null }));
      this.open = { kind: 'text' };
      out.push(this.delta({ type: 'text_delta', text }));
    }
    for (const call of d?.toolCalls ?? []) {
      const same = this.open?.kind === 'tool' && this.open.toolIndex === call.index;
      if (!same) {
        out.push(
          ...this.startBlock({
            type: 'tool_use',
            id: call.id,
            name: call.function?.name ?? '',
            input: {},
            caller: { type: 'direct' },
          }),
        );
        this.open = { kind: 'tool', toolIndex: call.index };
      }
      const args = call.function?.arguments ?? '';
      if (args !== '') out.push(this.delta({ type: 'input_json_delta', partial_json: args }));
    }
    if (choice.finishReason !== '') this.finish = choice.finishReason;
    return out;
  }

  /** The closing events of a stream that ended normally. */
  end(): StreamEvent[] {
    const out = this.closeBlock();
    const t = tokens(this.usage);
    out.push({
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: {
          stop_reason: stopReason(this.finish || 'stop'),
          stop_sequence: null,
          stop_details: null,
          container: null,
        },
        usage: {
          input_tokens: t.input,
          output_tokens: t.output,
          cache_creation_input_tokens: t.written,
          cache_read_input_tokens: t.cached,
          // Anthropic's message_delta usage has no `cache_creation` (the SDK's MessageDeltaUsage):
          // the tiers' sum is `cache_creation_input_tokens`; the split is in message_start where the
          // first chunk carried the usage, and in the non-stream answer.
          output_tokens_details: null,
          server_tool_use: null,
          ...(this.usage?.estimated === true ? { estimated: true } : {}),
        },
      },
    });
    out.push({ event: 'message_stop', data: { type: 'message_stop' } });
    return out;
  }

  private startBlock(block: Obj): StreamEvent[] {
    const out = this.closeBlock();
    this.index += 1;
    out.push({
      event: 'content_block_start',
      data: { type: 'content_block_start', index: this.index, content_block: block },
    });
    return out;
  }

  private closeBlock(): StreamEvent[] {
    if (this.open === undefined) return [];
    this.open = undefined;
    return [{ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.index } }];
  }

  private delta(delta: Obj): StreamEvent {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: this.index, delta } };
  }
}

/** A model as Anthropic's `ModelInfo`. */
export function modelInfoJson(m: Model): Obj {
  return {
    type: 'model',
    id: m.id,
    display_name: m.id,
    created_at: new Date(Number(m.created) * 1000).toISOString(),
    capabilities: null,
    deprecated_at: null,
    lifecycle: 'active',
    line: null,
    max_input_tokens: Number(m.contextWindow),
    max_tokens: Number(m.maxOutputTokens),
    retires_at: null,
  };
}
