import { count, isObj, str, type Obj } from '../translate';
import type { WireChunk, WireCompletion, WireToolCall, WireUsage } from '../types';

/*
 * OpenAI Responses answers → chat completions. Upstream JSON is untrusted: a reader returns
 * undefined for anything that is not the Responses wire, which the provider reports as
 * `upstream_error`. Output items and events a chat answer has no place for (built-in tool calls,
 * reasoning's encrypted content, annotations' deltas) are skipped.
 */

/**
 * Responses usage → chat usage: cached input (and the cache writes an OpenAI-family proxy reports
 * as `input_tokens_details.cache_write_tokens`) and reasoning output as their chat details.
 */
export function readResponsesUsage(value: unknown): WireUsage | undefined {
  if (!isObj(value)) return undefined;
  const input = count(value['input_tokens']);
  const output = count(value['output_tokens']);
  if (input === undefined || output === undefined) return undefined;
  const details = isObj(value['input_tokens_details']) ? value['input_tokens_details'] : undefined;
  const cached = details === undefined ? undefined : count(details['cached_tokens']);
  const written = details === undefined ? undefined : count(details['cache_write_tokens']);
  const reasoning = isObj(value['output_tokens_details'])
    ? count(value['output_tokens_details']['reasoning_tokens'])
    : undefined;
  return {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: count(value['total_tokens']) ?? input + output,
    ...(cached !== undefined || written !== undefined
      ? {
          prompt_tokens_details: {
            cached_tokens: cached ?? 0,
            ...(written !== undefined && written > 0 ? { cache_write_tokens: written } : {}),
          },
        }
      : {}),
    ...(reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: reasoning } } : {}),
  };
}

/** A finished Response's finish_reason: `incomplete` for the output limit is `length`. */
function finishReason(response: Obj, toolCalls: boolean): string {
  if (response['status'] === 'incomplete') {
    const reason = isObj(response['incomplete_details']) ? response['incomplete_details']['reason'] : undefined;
    return reason === 'content_filter' ? 'content_filter' : 'length';
  }
  return toolCalls ? 'tool_calls' : 'stop';
}

/** The reasoning text of a reasoning item: its summary parts, else its reasoning_text content. */
function reasoningText(item: Obj): string {
  const parts = (key: string): string[] =>
    Array.isArray(item[key]) ? item[key].filter(isObj).map((p) => str(p['text']) ?? '') : [];
  const summary = parts('summary');
  return (summary.length > 0 ? summary : parts('content')).join('\n\n');
}

/** A Response object (a non-streamed answer, or `response.completed`'s) as a chat completion. */
export function readResponse(
  value: unknown,
): (Omit<WireCompletion, 'usage'> & { usage: WireUsage | undefined }) | undefined {
  if (!isObj(value) || value['object'] !== 'response' || !Array.isArray(value['output'])) return undefined;
  let text: string | null = null;
  let refusal: string | undefined;
  let reasoning = '';
  const calls: WireToolCall[] = [];
  for (const item of value['output']) {
    if (!isObj(item)) return undefined;
    if (item['type'] === 'message' && Array.isArray(item['content'])) {
      for (const part of item['content']) {
        if (!isObj(part)) return undefined;
        if (part['type'] === 'output_text') text = (text ?? '') + (str(part['text']) ?? '');
        else if (part['type'] === 'refusal') refusal = (refusal ?? '') + (str(part['refusal']) ?? '');
      }
    } else if (item['type'] === 'reasoning') {
      const t = reasoningText(item);
      reasoning += reasoning !== '' && t !== '' ? `\n\n${t}` : t;
    } else if (item['type'] === 'function_call') {
      const name = str(item['name']);
      if (name === undefined) return undefined;
      calls.push({
        id: str(item['call_id']) ?? str(item['id']) ?? '',
        type: 'function',
        function: { name, arguments: str(item['arguments']) ?? '' },
      });
    }
  }
  const tier = str(value['service_tier']);
  return {
    id: str(value['id']) ?? '',
    created: count(value['created_at']) ?? Math.floor(Date.now() / 1000),
    model: str(value['model']) ?? '',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
          ...(refusal !== undefined ? { refusal } : {}),
          ...(reasoning !== '' ? { reasoning_content: reasoning } : {}),
        },
        finish_reason: finishReason(value, calls.length > 0),
      },
    ],
    usage: readResponsesUsage(value['usage']),
    ...(tier !== undefined ? { service_tier: tier } : {}),
  };
}

/** What one stream event meant: chunks to pass on, the end with its usage, an error, or garbage. */
export type ResponsesStep =
  | { readonly kind: 'chunks'; readonly chunks: WireChunk[] }
  | { readonly kind: 'done'; readonly chunks: WireChunk[]; readonly usage: WireUsage | undefined }
  | { readonly kind: 'error'; readonly error: Obj }
  | { readonly kind: 'garbage'; readonly what: string };

/**
 * Renders the Responses event stream as chat chunks: `output_text.delta` as `content`,
 * `refusal.delta` as `refusal`, `reasoning_summary_text.delta` and `reasoning_text.delta` as
 * `reasoning_content`, each `function_call` item as one tool call (call id and name on
 * `output_item.added`, then `function_call_arguments.delta`), and `response.completed` /
 * `response.incomplete` as the finish chunk with the usage. `response.failed` and `error` are errors.
 */
export function createResponsesStreamReader(
  fallbackModel: string,
  now: number,
): {
  read(event: unknown): ResponsesStep;
} {
  let id = '';
  let model = fallbackModel;
  let created = Math.floor(now / 1000);
  // Function-call item id → chat tool-call index.
  const tools = new Map<string, number>();
  // A reasoning item's summary parts are separated as in the non-streamed answer.
  const summaryParts = new Set<string>();

  const chunk = (delta: WireChunk['choices'][number]['delta'], finish: string | null = null): WireChunk => ({
    id,
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const chunks = (...list: WireChunk[]): ResponsesStep => ({ kind: 'chunks', chunks: list });
  const delta = (event: Obj): string => str(event['delta']) ?? '';

  return {
    read(event) {
      if (!isObj(event) || typeof event['type'] !== 'string') return { kind: 'garbage', what: 'event has no type' };
      switch (event['type']) {
        case 'response.created': {
          const response = event['response'];
          if (!isObj(response)) return { kind: 'garbage', what: 'response.created without a response' };
          id = str(response['id']) ?? id;
          model = str(response['model']) ?? model;
          created = count(response['created_at']) ?? created;
          return chunks(chunk({ role: 'assistant', content: '' }));
        }
        case 'response.output_item.added': {
          const item = event['item'];
          if (!isObj(item)) return { kind: 'garbage', what: 'output_item.added without an item' };
          if (item['type'] !== 'function_call') return chunks();
          const name = str(item['name']);
          if (name === undefined) return { kind: 'garbage', what: 'function_call item without a name' };
          const index = tools.size;
          tools.set(str(item['id']) ?? `#${count(event['output_index']) ?? index}`, index);
          const args = str(item['arguments']) ?? '';
          return chunks(
            chunk({
              tool_calls: [
                { index, id: str(item['call_id']) ?? '', type: 'function', function: { name, arguments: args } },
              ],
            }),
          );
        }
        case 'response.function_call_arguments.delta': {
          const index = tools.get(str(event['item_id']) ?? `#${count(event['output_index']) ?? -1}`);
          if (index === undefined) return { kind: 'garbage', what: 'arguments delta for an unknown function call' };
          const text = delta(event);
          return chunks(...(text !== '' ? [chunk({ tool_calls: [{ index, function: { arguments: text } }] })] : []));
        }
        case 'response.output_text.delta': {
          const text = delta(event);
          return chunks(...(text !== '' ? [chunk({ content: text })] : []));
        }
        case 'response.refusal.delta': {
          const text = delta(event);
          return chunks(...(text !== '' ? [chunk({ refusal: text })] : []));
        }
        case 'response.reasoning_summary_part.added': {
          const item = str(event['item_id']) ?? '';
          const first = !summaryParts.has(item);
          summaryParts.add(item);
          return chunks(...(first ? [] : [chunk({ reasoning_content: '\n\n' })]));
        }
        case 'response.reasoning_summary_text.delta':
        case 'response.reasoning_text.delta': {
          const text = delta(event);
          return chunks(...(text !== '' ? [chunk({ reasoning_content: text })] : []));
        }
        case 'response.completed':
        case 'response.incomplete': {
          const response = event['response'];
          if (!isObj(response)) return { kind: 'garbage', what: `${event['type']} without a response` };
          const finish = finishReason(response, tools.size > 0);
          return { kind: 'done', chunks: [chunk({}, finish)], usage: readResponsesUsage(response['usage']) };
        }
        case 'response.failed': {
          const response = isObj(event['response']) ? event['response'] : {};
          return { kind: 'error', error: isObj(response['error']) ? response['error'] : {} };
        }
        case 'error':
          return { kind: 'error', error: event };
        default:
          // in_progress, *.done, content_part.*, annotations, built-in tool progress, newer events.
          return chunks();
      }
    },
  };
}
