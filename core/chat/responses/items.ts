import { invalidArgument } from '../../errors';
import type { JsonObject } from '../../providers/llm/types';

/** A page request of GET /responses/{id}/input_items. */
export interface ItemPage {
  /** 1-100; 0 means 20. */
  readonly limit: number;
  /** "asc", "desc" or "" (desc). */
  readonly order: string;
  /** An item id; "" for the first page. */
  readonly after: string;
}

function asContent(content: unknown, role: string): unknown[] {
  if (Array.isArray(content)) {
    return content.map((part: unknown) =>
      typeof part === 'object' && part !== null && (part as JsonObject)['type'] === 'output_text'
        ? { annotations: [], ...(part as JsonObject) }
        : part,
    );
  }
  const text = typeof content === 'string' ? content : '';
  return [role === 'assistant' ? { type: 'output_text', text, annotations: [] } : { type: 'input_text', text }];
}

/**
 * A stored item as an OpenAI ItemResource. Output items of earlier responses keep their ids; the
 * caller's own input items get ids made from the response id and their position, so the same
 * item has the same id on every read.
 */
function itemResource(item: JsonObject, position: number, hex: string): JsonObject {
  const id = typeof item['id'] === 'string' ? item['id'] : undefined;
  switch (item['type']) {
    case 'message': {
      const role = String(item['role']);
      return {
        ...item,
        id: id ?? `msg_${hex}_in${position}`,
        status: 'completed',
        content: asContent(item['content'], role),
      };
    }
    case 'function_call':
      return { ...item, id: id ?? `fc_${hex}_in${position}`, status: 'completed' };
    case 'function_call_output':
      return { ...item, id: id ?? `fco_${hex}_in${position}`, status: 'completed' };
    default:
      return { ...item, id: id ?? `item_${hex}_in${position}` };
  }
}

/**
 * The input items of a stored response as an OpenAI ResponseItemList: every item the model was
 * given (the conversation of `previous_response_id`, then this request's input), newest first
 * unless `order` is "asc".
 */
export function inputItemList(
  responseId: string,
  conversation: readonly JsonObject[],
  outputCount: number,
  page: ItemPage,
): JsonObject {
  const limit = page.limit === 0 ? 20 : page.limit;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw invalidArgument('limit', `Invalid 'limit': expected an integer between 1 and 100, got ${limit}.`);
  if (page.order !== '' && page.order !== 'asc' && page.order !== 'desc')
    throw invalidArgument('order', `Invalid 'order': expected 'asc' or 'desc', got '${page.order}'.`);
  const hex = responseId.slice('resp_'.length);
  const items = conversation
    .slice(0, Math.max(0, conversation.length - outputCount))
    .map((item, i) => itemResource(item, i, hex));
  if (page.order !== 'asc') items.reverse();
  let start = 0;
  if (page.after !== '') {
    const at = items.findIndex((item) => item['id'] === page.after);
    if (at < 0) throw invalidArgument('after', `Invalid 'after': no item '${page.after}' in this response's input.`);
    start = at + 1;
  }
  const data = items.slice(start, start + limit);
  return {
    object: 'list',
    data,
    has_more: start + limit < items.length,
    first_id: (data[0]?.['id'] as string | undefined) ?? '',
    last_id: (data[data.length - 1]?.['id'] as string | undefined) ?? '',
  };
}
