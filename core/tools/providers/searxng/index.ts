import type { Dispatcher } from 'undici';
import { asDate, asRecord, asString, createUpstream, tryJson, upstreamFailure, resultList } from '../../upstream';
import type { ToolConfig, WebResult, WebSearchProvider } from '../../types';

/**
 * web_search through a self-hosted SearXNG (`GET /search?format=json`), flat-priced. SearXNG
 * answers 403 when the instance has not enabled the JSON format (`search.formats` in its
 * settings.yml). Shapes: ../shared/ref/providers/searxng*.json.
 */
export function createSearxngProvider(config: ToolConfig, dispatcher: Dispatcher): WebSearchProvider {
  const upstream = createUpstream({
    provider: 'searxng',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  return {
    name: 'searxng',
    sandbox: false,
    async run(args, signal) {
      const response = await upstream.request({
        path: '/search',
        // SearXNG's own filters: `time_range` (day, week, month, year) and `language` (a code its
        // engines understand). Domain lists have no parameter; the tools service applies them to
        // the results.
        query: {
          q: args.query,
          format: 'json',
          pageno: 1,
          safesearch: 1,
          time_range: args.recency,
          language: args.language,
        },
        headers: config.apiKey !== undefined ? { authorization: `Bearer ${config.apiKey}` } : {},
        signal,
      });
      if (response.status === 403) {
        throw upstreamFailure(
          'upstream_error',
          'The web search service is misconfigured on this server; web search is unavailable for now',
          'searxng: HTTP 403: the instance does not serve format=json; add "json" to search.formats in its settings.yml',
        );
      }
      if (response.status === 429) {
        throw upstreamFailure(
          'upstream_unavailable',
          'The web search service is rate-limiting this server; try again in a minute',
          'searxng: HTTP 429 (limiter)',
        );
      }
      if (response.status !== 200) {
        const reason = asString(asRecord(tryJson(response.text))['error']) || response.text.slice(0, 200);
        const code = response.status >= 500 ? 'upstream_unavailable' : 'upstream_error';
        throw upstreamFailure(
          code,
          'The web search service could not run this search; try again or rephrase the query',
          `searxng: HTTP ${response.status}: ${reason}`,
        );
      }
      const items: WebResult[] = [];
      const seen = new Set<string>();
      for (const raw of resultList('searxng', asRecord(upstream.json(response))['results'], 'results')) {
        const result = asRecord(raw);
        const url = asString(result['url']);
        if (url === '' || seen.has(url)) continue;
        seen.add(url);
        items.push({
          title: asString(result['title']) || url,
          url,
          summary: asString(result['content']),
          date: asDate(result['publishedDate']),
        });
        if (items.length >= args.maxResults) break;
      }
      return { items };
    },
  };
}
