import { SvcError } from '../../errors';
import type { JsonObject, WireMessage, WireToolCall } from '../../providers/llm/types';
import type { ToolService } from '../../tools/service';
import type { RunContext } from '../runner';
import { urlCitations, webSearchItem, type WebSource } from './response';
import { isHosted, type ToolMap } from './tools';

/*
 * The hosted web_search tool of the Responses API: svc runs the searches the model asks for with
 * the tools domain's web_search provider, between model turns, each search billed as a tool call.
 */

/** The query of a web_search call ('' when its arguments have none). */
export function queryOf(call: WireToolCall): string {
  try {
    const args: unknown = JSON.parse(call.function.arguments);
    if (typeof args === 'object' && args !== null && typeof (args as JsonObject)['query'] === 'string')
      return String((args as JsonObject)['query']);
  } catch {
    // The search reports the bad arguments to the model.
  }
  return '';
}

/** The answer's text parts with url_citation annotations for the sources it quotes. */
export function withCitations(items: JsonObject[], sources: readonly WebSource[]): JsonObject[] {
  if (sources.length === 0) return items;
  return items.map((item) =>
    item['type'] !== 'message' || !Array.isArray(item['content'])
      ? item
      : {
          ...item,
          content: (item['content'] as JsonObject[]).map((part) =>
            part['type'] === 'output_text'
              ? { ...part, annotations: urlCitations(String(part['text']), sources) }
              : part,
          ),
        },
  );
}

/**
 * Runs one hosted web search the model asked for. Each search is its own tool charge (the
 * web_search tariff, nothing when it finds nothing) under `<request id>:web_search:<n>`; a bad
 * query or a provider failure goes back to the model as the tool's answer.
 */
export async function search(
  tools: Pick<ToolService, 'call'>,
  call: WireToolCall,
  run: RunContext,
  n: number,
  itemId: string,
): Promise<{ item: JsonObject; sources: WebSource[]; cost: bigint; message: WireMessage }> {
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    args = { query: call.function.arguments };
  }
  const query =
    typeof args === 'object' && args !== null && typeof (args as JsonObject)['query'] === 'string'
      ? String((args as JsonObject)['query'])
      : '';
  // Bad arguments and provider failures come back as an isError outcome the model reads.
  const outcome = await tools.call({
    principal: run.principal,
    requestId: `${run.requestId}:web_search:${n}`,
    clientRequestId: run.clientRequestId,
    name: 'web_search',
    arguments: args,
    signal: run.signal,
    meter: run.meter,
  });
  // The wallet or the key's cap refused the search: the response stops as a chat call refused
  // for credit would (the model cannot top up the wallet).
  if (outcome.isError && (outcome.errorCode === 'insufficient_credit' || outcome.errorCode === 'key_cap_exceeded'))
    throw new SvcError(outcome.errorCode, outcome.text, { details: outcome.details });
  const text = outcome.text;
  const failed = outcome.isError;
  const cost = outcome.billing?.cost ?? 0n;
  let sources: WebSource[] = [];
  if (!outcome.isError) {
    const results = outcome.structuredContent['results'];
    sources = (Array.isArray(results) ? (results as JsonObject[]) : []).map((r) => ({
      url: typeof r['url'] === 'string' ? r['url'] : '',
      title: typeof r['title'] === 'string' ? r['title'] : '',
    }));
  }
  return {
    item: webSearchItem(itemId, query, sources, failed ? 'failed' : 'completed'),
    sources,
    cost,
    message: { role: 'tool', tool_call_id: call.id, content: text },
  };
}

/**
 * The hosted calls of a turn, when every call of it is one (a turn that also calls the client's
 * tools goes back to the client).
 */
export function hostedOnly(calls: readonly WireToolCall[], tools: ToolMap): WireToolCall[] {
  const hosted = calls.filter((c) => isHosted(tools.get(c.function.name)));
  return hosted.length > 0 && hosted.length === calls.length ? hosted : [];
}
