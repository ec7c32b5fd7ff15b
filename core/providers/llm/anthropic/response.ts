import { count, isObj, str, type Obj } from '../translate';
import type { WireChunk, WireCompletion, WireToolCall, WireUsage } from '../types';

/*
 * Anthropic Messages answers → chat completions. Upstream JSON is untrusted: a reader returns
 * undefined for anything that is not the Messages wire, which the provider reports as
 * `upstream_error`. Unknown block and event types (newer API features) are skipped.
 */

/** Anthropic's stop_reason as a chat finish_reason. */
export function finishReason(stopReason: unknown): string {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      // end_turn, stop_sequence, pause_turn.
      return 'stop';
  }
}

/**
 * Anthropic usage → chat usage (SPEC §6, §13): every prompt token the upstream counted is a prompt
 * token (`input_tokens` are the uncached ones), cache reads are `cached_tokens`, cache writes
 * `cache_write_tokens`, of which `cache_creation.ephemeral_1h_input_tokens` are one-hour writes
 * (`cache_write_1h_tokens`; without `cache_creation` every write is a five-minute write); thinking
 * tokens, where reported, are reasoning tokens (within output).
 */
export function readAnthropicUsage(value: unknown): WireUsage | undefined {
  if (!isObj(value)) return undefined;
  const input = count(value['input_tokens']);
  const output = count(value['output_tokens']);
  if (input === undefined || output === undefined) return undefined;
  const read = count(value['cache_read_input_tokens']) ?? 0;
  const tiers = isObj(value['cache_creation']) ? value['cache_creation'] : {};
  const write5m = count(tiers['ephemeral_5m_input_tokens']) ?? 0;
  const write1h = count(tiers['ephemeral_1h_input_tokens']) ?? 0;
  // The tiers are parts of cache_creation_input_tokens; an upstream whose total says less than
  // its tiers is billed for the tiers it itemised.
  const write = Math.max(count(value['cache_creation_input_tokens']) ?? 0, write5m + write1h);
  const details = isObj(value['output_tokens_details']) ? value['output_tokens_details'] : {};
  const thinking = count(details['thinking_tokens']);
  const prompt = input + read + write;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: {
      cached_tokens: read,
      ...(write > 0 ? { cache_write_tokens: write } : {}),
      ...(write1h > 0 ? { cache_write_1h_tokens: write1h } : {}),
    },
    ...(thinking !== undefined ? { completion_tokens_details: { reasoning_tokens: thinking } } : {}),
  };
}

function toolCallOf(block: Obj): WireToolCall | undefined {
  const id = str(block['id']);
  const name = str(block['name']);
  if (id === undefined || name === undefined) return undefined;
  return { id, type: 'function', function: { name, arguments: JSON.stringify(block['input'] ?? {}) } };
}

/** A non-streamed Messages answer as a chat completion, or undefined when it is not one. */
export function readAnthropicMessage(
  value: unknown,
  now: number,
): (Omit<WireCompletion, 'usage'> & { usage: WireUsage | undefined }) | undefined {
  if (!isObj(value) || value['type'] !== 'message' || !Array.isArray(value['content'])) return undefined;
  let text: string | null = null;
  let reasoning = '';
  const calls: WireToolCall[] = [];
  for (const block of value['content']) {
    if (!isObj(block)) return undefined;
    if (block['type'] === 'text') {
      const t = str(block['text']);
      if (t === undefined) return undefined;
      text = (text ?? '') + t;
    } else if (block['type'] === 'thinking') reasoning += str(block['thinking']) ?? '';
    else if (block['type'] === 'tool_use') {
      const call = toolCallOf(block);
      if (call === undefined) return undefined;
      calls.push(call);
    }
  }
  return {
    id: str(value['id']) ?? '',
    created: Math.floor(now / 1000),
    model: str(value['model']) ?? '',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
          ...(reasoning !== '' ? { reasoning_content: reasoning } : {}),
        },
        finish_reason: finishReason(value['stop_reason']),
      },
    ],
    usage: readAnthropicUsage(value['usage']),
  };
}

/** What one stream event meant: chunks to pass on, the end of the message, an error, or garbage. */
export type StreamStep =
  | { readonly kind: 'chunks'; readonly chunks: WireChunk[] }
  | { readonly kind: 'stop' }
  | { readonly kind: 'error'; readonly error: Obj }
  | { readonly kind: 'garbage'; readonly what: string };

/**
 * Renders Anthropic's stream (`message_start`, `content_block_start` / `_delta` / `_stop`,
 * `message_delta`, `message_stop`, `ping`, `error`) as chat chunks: text deltas as `content`,
 * thinking deltas as `reasoning_content`, each `tool_use` block as one tool call (its id and name
 * in the first delta, then the `input_json_delta` pieces as arguments), the stop reason as the
 * finish chunk. `usage()` is the latest usage: `message_start`'s, updated by `message_delta`.
 */
export function createAnthropicStreamReader(
  fallbackModel: string,
  now: number,
): {
  read(event: unknown): StreamStep;
  usage(): WireUsage | undefined;
  finished(): boolean;
} {
  let id = '';
  let model = fallbackModel;
  const created = Math.floor(now / 1000);
  let usage: Obj | undefined;
  let finished = false;
  // Anthropic block index → chat tool-call index, for tool_use blocks only.
  const tools = new Map<number, number>();

  const chunk = (delta: WireChunk['choices'][number]['delta'], finish: string | null = null): WireChunk => ({
    id,
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const chunks = (...list: WireChunk[]): StreamStep => ({ kind: 'chunks', chunks: list });

  return {
    usage: () => readAnthropicUsage(usage),
    finished: () => finished,
    read(event) {
      if (!isObj(event) || typeof event['type'] !== 'string') return { kind: 'garbage', what: 'event has no type' };
      switch (event['type']) {
        case 'message_start': {
          const message = event['message'];
          if (!isObj(message)) return { kind: 'garbage', what: 'message_start without a message' };
          id = str(message['id']) ?? id;
          model = str(message['model']) ?? model;
          if (isObj(message['usage'])) usage = { ...message['usage'] };
          // The prompt's count and cache split come first: what a caller that leaves pays for it.
          const prompt = readAnthropicUsage(usage);
          return chunks({ ...chunk({ role: 'assistant', content: '' }), ...(prompt !== undefined ? { prompt } : {}) });
        }
        case 'content_block_start': {
          const block = event['content_block'];
          const index = count(event['index']);
          if (!isObj(block) || index === undefined) return { kind: 'garbage', what: 'content_block_start' };
          if (block['type'] === 'tool_use') {
            const call = toolCallOf(block);
            if (call === undefined) return { kind: 'garbage', what: 'tool_use block without id or name' };
            const toolIndex = tools.size;
            tools.set(index, toolIndex);
            return chunks(
              chunk({
                tool_calls: [
                  {
                    index: toolIndex,
                    id: call.id,
                    type: 'function',
                    function: { name: call.function.name, arguments: '' },
                  },
                ],
              }),
            );
          }
          const text = block['type'] === 'text' ? str(block['text']) : undefined;
          return chunks(...(text !== undefined && text !== '' ? [chunk({ content: text })] : []));
        }
        case 'content_block_delta': {
          const delta = event['delta'];
          if (!isObj(delta)) return { kind: 'garbage', what: 'content_block_delta without a delta' };
          const text = str(delta['text']) ?? '';
          const thinking = str(delta['thinking']) ?? '';
          const json = str(delta['partial_json']) ?? '';
          if (delta['type'] === 'text_delta' && text !== '') return chunks(chunk({ content: text }));
          if (delta['type'] === 'thinking_delta' && thinking !== '')
            return chunks(chunk({ reasoning_content: thinking }));
          if (delta['type'] === 'input_json_delta' && json !== '') {
            const toolIndex = tools.get(count(event['index']) ?? -1);
            if (toolIndex === undefined) return { kind: 'garbage', what: 'input_json_delta outside a tool_use block' };
            return chunks(chunk({ tool_calls: [{ index: toolIndex, function: { arguments: json } }] }));
          }
          // signature_delta, citations_delta and empty deltas carry nothing a chat client reads.
          return chunks();
        }
        case 'message_delta': {
          const delta = isObj(event['delta']) ? event['delta'] : {};
          // message_delta's usage is cumulative; fields it omits keep message_start's values.
          if (isObj(event['usage'])) usage = { ...(usage ?? {}), ...event['usage'] };
          if (delta['stop_reason'] === undefined || delta['stop_reason'] === null) return chunks();
          finished = true;
          return chunks(chunk({}, finishReason(delta['stop_reason'])));
        }
        case 'message_stop':
          return { kind: 'stop' };
        case 'error':
          return { kind: 'error', error: isObj(event['error']) ? event['error'] : {} };
        default:
          // ping, content_block_stop and event types newer than this reader.
          return chunks();
      }
    },
  };
}
