import type { Dispatcher } from 'undici';
/** Credits per one million tokens (a token-billed tool's tariff). */
export interface TokenTariff {
  readonly inputPer1m: bigint;
  readonly outputPer1m: bigint;
}

/** A tool price: flat credits per successful call, or a token tariff with a cap for the hold. */
export type ToolPrice =
  | { readonly kind: 'flat'; readonly credits: bigint }
  | { readonly kind: 'tokens'; readonly tariff: TokenTariff; readonly cap: bigint };

/** One tool's entry of the configuration file (`tools.<name>`), or its built-in sandbox entry. */
export interface ToolConfig {
  /** A name from the tool list (core/tools/catalog.ts); the loader refuses any other. */
  readonly name: string;
  readonly provider: string;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  /** Provider model (perplexity). */
  readonly model: string | undefined;
  readonly price: ToolPrice;
  /** Provider timeout in milliseconds (default 15000). */
  readonly timeoutMs: number;
}

/** How recent web results must be. */
export type Recency = 'day' | 'week' | 'month' | 'year';

export interface WebSearchArgs {
  readonly query: string;
  /** How many results the provider returns at most: more than asked when svc filters them after. */
  readonly maxResults: number;
  /** How many results the tool returns after its own filters (the `max_results` argument). */
  readonly resultLimit?: number | undefined;
  readonly recency?: Recency | undefined;
  /** Only results from these domains (or their subdomains), e.g. "example.com". */
  readonly includeDomains?: readonly string[] | undefined;
  /** No results from these domains (or their subdomains). */
  readonly excludeDomains?: readonly string[] | undefined;
  /** ISO 639-1 code of the language the results should be in, e.g. "fa". */
  readonly language?: string | undefined;
}

export interface WebResult {
  readonly title: string;
  readonly url: string;
  readonly summary: string;
  /** The page's date (YYYY-MM-DD) when the provider gives one, else null. */
  readonly date: string | null;
}

export interface MapsSearchArgs {
  readonly query: string;
  readonly latitude: number;
  readonly longitude: number;
  readonly limit: number;
  /** Only places within this many metres of the point. */
  readonly radiusM?: number | undefined;
}

export interface Place {
  readonly name: string;
  readonly address: string;
  readonly category: string;
  readonly latitude: number;
  readonly longitude: number;
  /** Metres from the search point, rounded. */
  readonly distance_m: number;
}

export type ShoppingSort = 'relevance' | 'price_asc' | 'price_desc';

export interface ShoppingSearchArgs {
  readonly query: string;
  readonly limit: number;
  readonly minPriceToman: number | undefined;
  readonly maxPriceToman: number | undefined;
  readonly sort: ShoppingSort;
}

export interface Product {
  readonly title: string;
  /** A positive integer, or null when the shop shows no price. Never 0. */
  readonly price_toman: number | null;
  /** The shop; for a product compared across several shops, the comparison site. */
  readonly store: string;
  readonly url: string;
  readonly image_url: string | null;
  /** How many shops offer the product, when the source says; null when it does not. */
  readonly offers: number | null;
  /** True when `price_toman` is the lowest of several offers ("from …"), not one shop's price. */
  readonly price_is_lowest: boolean;
}

export interface TokenUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** What a provider found; an empty `items` is a normal "nothing found", never an error. */
export interface ProviderResult<Item> {
  readonly items: readonly Item[];
  /** Set by token-billed providers (perplexity). */
  readonly usage?: TokenUsage;
  /**
   * Arguments the provider could not apply (e.g. ["recency"] from a source without dates); the
   * result says so to the model instead of pretending they were honoured.
   */
  readonly unapplied?: readonly string[];
}

/**
 * One upstream behind one tool. `run` throws SvcError upstream_error / upstream_unavailable /
 * upstream_timeout (message for the model, operator detail in `cause`) on failure.
 */
/**
 * The core's one upstream dispatcher as the tools see it (`UpstreamHttp` of core/providers/http,
 * which the composition root builds): a view of it under each provider's name.
 */
export interface ToolHttp {
  forUpstream(label: { readonly name: string; readonly provider: string }): Dispatcher;
}

export interface ToolProvider<Args, Item> {
  /** The configured provider name, e.g. "neshan". */
  readonly name: string;
  /** True for the offline sandbox providers, whose every result is labelled as such. */
  readonly sandbox: boolean;
  run(args: Args, signal: AbortSignal): Promise<ProviderResult<Item>>;
}

export type WebSearchProvider = ToolProvider<WebSearchArgs, WebResult>;
export type MapsProvider = ToolProvider<MapsSearchArgs, Place>;
export type ShoppingProvider = ToolProvider<ShoppingSearchArgs, Product>;
