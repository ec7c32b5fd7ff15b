import type { Dispatcher } from 'undici';
import {
  asArray,
  asDate,
  asNumber,
  asRecord,
  asString,
  createUpstream,
  upstreamFailure,
  resultList,
} from '../../upstream';
import type { ToolConfig, WebResult, WebSearchArgs, WebSearchProvider } from '../../types';

/**
 * web_search through Perplexity's Agent API (`POST /v1/agent` with the `web_search` tool). The
 * results come from the `search_results` output items; the tokens in `usage` are what the call
 * is charged by. Shapes: ../shared/ref/providers/perplexity-agent*.json.
 */
export function createPerplexityProvider(config: ToolConfig, dispatcher: Dispatcher): WebSearchProvider {
  const upstream = createUpstream({
    provider: 'perplexity',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  const model = config.model ?? 'sonar';
  return {
    name: 'perplexity',
    sandbox: false,
    async run(args, signal) {
      // Kept to the fields the Agent API documents: it rejects unknown fields with a 400
      // (perplexity-error-400.json), so no guessed tuning knobs are sent.
      const response = await upstream.request({
        method: 'POST',
        path: '/v1/agent',
        headers: { authorization: `Bearer ${config.apiKey ?? ''}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, input: args.query, tools: [webSearchTool(args)] }),
        signal,
      });
      if (response.status !== 200) throw httpFailure(response.status, response.text);
      const body = asRecord(upstream.json(response));
      // A failed run is still HTTP 200 (perplexity-agent-failed-200.json).
      if (body['status'] !== 'completed') {
        const error = asRecord(body['error']);
        throw upstreamFailure(
          'upstream_error',
          'The web search provider failed to complete this search; try again, or rephrase the query',
          `perplexity: run status ${asString(body['status']) || 'missing'}: ${asString(error['code'])} ${asString(error['message'])}`,
        );
      }
      const items: WebResult[] = [];
      const seen = new Set<string>();
      for (const output of resultList('perplexity', body['output'], 'output')) {
        const item = asRecord(output);
        if (item['type'] !== 'search_results') continue;
        for (const raw of asArray(item['results'])) {
          const result = asRecord(raw);
          const url = asString(result['url']);
          if (url === '' || seen.has(url)) continue;
          seen.add(url);
          items.push({
            title: asString(result['title']) || url,
            url,
            summary: asString(result['snippet']),
            date: asDate(result['date']),
          });
        }
      }
      const usage = asRecord(body['usage']);
      return {
        items: items.slice(0, args.maxResults),
        usage: {
          inputTokens: asNumber(usage['input_tokens']) ?? 0,
          outputTokens: asNumber(usage['output_tokens']) ?? 0,
        },
      };
    },
  };
}

/**
 * The Agent API's `web_search` tool with the search's filters (its documented `filters`:
 * `search_recency_filter`, `search_language_filter`, `search_domain_filter` with "-" for a
 * denied domain). The domain filter is an allow list or a deny list: with both lists given, the
 * allow list goes upstream and the tools service drops the denied domains from the results.
 */
function webSearchTool(args: WebSearchArgs): Record<string, unknown> {
  const filters: Record<string, unknown> = {};
  if (args.recency !== undefined) filters['search_recency_filter'] = args.recency;
  if (args.language !== undefined) filters['search_language_filter'] = [args.language];
  if (args.includeDomains !== undefined) filters['search_domain_filter'] = args.includeDomains;
  else if (args.excludeDomains !== undefined) filters['search_domain_filter'] = args.excludeDomains.map((d) => `-${d}`);
  return Object.keys(filters).length > 0 ? { type: 'web_search', filters } : { type: 'web_search' };
}

function httpFailure(status: number, text: string) {
  let message = text.slice(0, 200);
  try {
    message = asString(asRecord(asRecord(JSON.parse(text))['error'])['message']) || message;
  } catch {
    // Not JSON (a proxy's HTML page): the raw prefix is the detail.
  }
  const detail = `perplexity: HTTP ${status}: ${message}`;
  if (status === 429)
    return upstreamFailure(
      'upstream_unavailable',
      'The web search provider is rate-limiting this service; try again in a minute',
      detail,
    );
  if (status >= 500)
    return upstreamFailure(
      'upstream_unavailable',
      'The web search provider is having trouble; try again in a moment',
      detail,
    );
  if (status === 401 || status === 403)
    return upstreamFailure(
      'upstream_error',
      'The web search provider is misconfigured on this service; web search is unavailable for now',
      detail,
    );
  return upstreamFailure(
    'upstream_error',
    'The web search provider rejected the search; try rephrasing the query',
    detail,
  );
}
