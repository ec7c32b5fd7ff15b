import { z } from 'zod';
import { invalidArgument } from '../errors';
import { liveProviders, outputSchema, svgIcon, type ToolProviderKind, type ToolSpec } from './definitions';
import { createPerplexityProvider } from './providers/perplexity';
import { createSandboxWebSearch } from './providers/sandbox-tools';
import { createSearxngProvider } from './providers/searxng';
import { parseArguments, queryArgument } from './schema';
import type { Recency, WebResult, WebSearchArgs } from './types';

type Kind = ToolProviderKind<WebSearchArgs, WebResult>;

/** `tools.web_search.provider`: the offline sandbox (the default), Perplexity or a SearXNG of one's own. */
const providers: { readonly sandbox: Kind } & Readonly<Record<string, Kind>> = {
  sandbox: { defaultBaseUrl: '', needsApiKey: false, create: createSandboxWebSearch },
  perplexity: {
    defaultBaseUrl: 'https://api.perplexity.ai',
    needsApiKey: true,
    defaultModel: 'sonar',
    create: createPerplexityProvider,
  },
  searxng: { needsApiKey: false, create: createSearxngProvider },
};

// A host name as a model would write it: "example.com", "news.example.co.uk", or a suffix ".ir".
const DOMAIN = /^\.?(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/;

const domains = (what: string) =>
  z
    .array(
      z
        .string()
        .max(253)
        .regex(DOMAIN, { message: 'must list bare domain names such as "example.com" (no scheme, path or spaces)' }),
    )
    .min(1)
    .max(20)
    .optional()
    .describe(what);

const MAX_RESULTS = 20;

const RECENCY_DAYS: Readonly<Record<Recency, number>> = { day: 1, week: 7, month: 31, year: 366 };

const input = z.strictObject({
  query: queryArgument(400, 'What to search for, in any language.'),
  max_results: z
    .int()
    .min(1)
    .max(MAX_RESULTS)
    .default(5)
    .describe('How many results to return at most (1-20, default 5); a provider may find fewer.'),
  recency: z
    .enum(['day', 'week', 'month', 'year'])
    .optional()
    .describe('Only pages published in the last day, week, month or year.'),
  include_domains: domains(
    'Only results from these domains or their subdomains, e.g. ["irna.ir", "bbc.com"] (at most 20).',
  ),
  exclude_domains: domains('No results from these domains or their subdomains (at most 20).'),
  language: z
    .string()
    .regex(/^[a-z]{2}$/, { message: 'must be a two-letter ISO 639-1 language code such as "fa" or "en"' })
    .optional()
    .describe('Prefer results in this language: an ISO 639-1 code such as "fa" or "en".'),
});

const result = z.strictObject({
  title: z.string(),
  url: z.string(),
  summary: z.string(),
  date: z
    .string()
    .nullable()
    .describe("The page's publication date (YYYY-MM-DD) when the search provider gives one, else null."),
});

/** The host of a URL, lower case, without a leading "www."; undefined when it has none. */
function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase().replace(/^www\./, '');
  } catch {
    return undefined;
  }
}

/** True when `host` is `domain` or below it ("news.bbc.com" is in "bbc.com"; ".ir" matches every .ir host). */
export function inDomain(host: string, domain: string): boolean {
  const bare = domain.replace(/^www\./, '');
  return bare.startsWith('.') ? host.endsWith(bare) : host === bare || host.endsWith(`.${bare}`);
}

/** web_search: pages from the configured web search provider. */
export const WEB_SEARCH: ToolSpec<'web_search', WebSearchArgs, WebResult> = {
  name: 'web_search',
  title: 'Web search',
  summary: 'pages',
  labels: { en: 'Web search', fa: 'جست‌وجوی وب' },
  description:
    'Searches the web and returns the most relevant pages as title, URL, a short summary and the date when known. ' +
    'recency, language and the domain lists narrow the search; a filter the provider cannot apply is named in ' +
    '"notice", never silently ignored. Domain lists and recency are also applied to the results themselves, so ' +
    'fewer than max_results may come back.',
  input,
  output: outputSchema(liveProviders(providers), result, {}),
  icons: [svgIcon('<circle cx="12" cy="12" r="10"/><path d="M2 12h20M12 2a15 15 0 0 1 0 20M12 2a15 15 0 0 0 0 20"/>')],
  parse(raw) {
    const args = parseArguments('web_search', input, raw);
    const lower = (list: readonly string[] | undefined) => list?.map((d) => d.toLowerCase());
    const includeDomains = lower(args.include_domains);
    const excludeDomains = lower(args.exclude_domains);
    const both = includeDomains?.find((d) => excludeDomains?.includes(d));
    if (both !== undefined)
      throw invalidArgument(
        'exclude_domains',
        `Argument "exclude_domains" of web_search repeats "${both}" from "include_domains"; a domain can be in one list only`,
      );
    // Results dropped by the domain or date filters here are made up for from a longer list.
    const filtered = includeDomains !== undefined || excludeDomains !== undefined || args.recency !== undefined;
    return {
      query: args.query.trim(),
      maxResults: filtered ? MAX_RESULTS : args.max_results,
      resultLimit: args.max_results,
      recency: args.recency,
      includeDomains,
      excludeDomains,
      language: args.language,
    };
  },
  refine(items, args, { now }) {
    const cutoff =
      args.recency === undefined
        ? undefined
        : new Date(now - RECENCY_DAYS[args.recency] * 86_400_000).toISOString().slice(0, 10);
    const kept = items.filter((item) => {
      // A page without a date cannot be judged by recency; the provider was asked to filter it.
      if (cutoff !== undefined && item.date !== null && item.date < cutoff) return false;
      if (args.includeDomains === undefined && args.excludeDomains === undefined) return true;
      const host = hostOf(item.url);
      if (host === undefined) return false;
      if (args.includeDomains !== undefined && !args.includeDomains.some((d) => inDomain(host, d))) return false;
      return !(args.excludeDomains ?? []).some((d) => inDomain(host, d));
    });
    return kept.slice(0, args.resultLimit ?? args.maxResults);
  },
  providers,
  // The sandbox search runs no model, so it has no tokens to bill: SPEC §6 then asks for a flat
  // price, set at 200 credits (between a shopping search and a maps search).
  sandboxPrice: { kind: 'flat', credits: 200n },
};
