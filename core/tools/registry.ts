import type { Dispatcher } from 'undici';
import type { SvcConfig, ToolConfig } from '../config/types';
import type { UpstreamHttp } from '../providers/http';
import { createDigikalaProvider } from './providers/digikala';
import { createNeshanProvider } from './providers/neshan';
import { createNominatimProvider } from './providers/nominatim';
import { createPerplexityProvider } from './providers/perplexity';
import { createSandboxMaps, createSandboxShopping, createSandboxWebSearch } from './providers/sandbox-tools';
import { createSearxngProvider } from './providers/searxng';
import { createTorobProvider } from './providers/torob';
import type { MapsProvider, ShoppingProvider, ToolName, WebSearchProvider } from './types';

/** The configured provider of each tool, created once. */
export interface ToolProviders {
  readonly web_search: WebSearchProvider;
  readonly maps_search_places: MapsProvider;
  readonly shopping_search: ShoppingProvider;
}

/** Providers each tool can be configured with (`tools.<name>.provider`). */
export const PROVIDER_NAMES: Readonly<Record<ToolName, readonly string[]>> = {
  web_search: ['perplexity', 'searxng', 'sandbox'],
  maps_search_places: ['neshan', 'nominatim', 'sandbox'],
  shopping_search: ['torob', 'digikala', 'sandbox'],
};

function unknownProvider(config: ToolConfig): Error {
  return new Error(
    `tools.${config.name}.provider: unknown provider "${config.provider}" (expected one of ${PROVIDER_NAMES[config.name].join(', ')})`,
  );
}

function webSearch(config: ToolConfig | undefined, http: UpstreamHttp): WebSearchProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxWebSearch();
  if (config.provider === 'perplexity') return createPerplexityProvider(config, dispatcherOf(config, http));
  if (config.provider === 'searxng') return createSearxngProvider(config, dispatcherOf(config, http));
  throw unknownProvider(config);
}

function maps(config: ToolConfig | undefined, http: UpstreamHttp): MapsProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxMaps();
  if (config.provider === 'neshan') return createNeshanProvider(config, dispatcherOf(config, http));
  if (config.provider === 'nominatim') return createNominatimProvider(config, dispatcherOf(config, http));
  throw unknownProvider(config);
}

function shopping(config: ToolConfig | undefined, http: UpstreamHttp): ShoppingProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxShopping();
  if (config.provider === 'torob') return createTorobProvider(config, dispatcherOf(config, http));
  if (config.provider === 'digikala') return createDigikalaProvider(config, dispatcherOf(config, http));
  throw unknownProvider(config);
}

/** The core's dispatcher under the tool's provider name (each provider serves one tool). */
function dispatcherOf(config: ToolConfig, http: UpstreamHttp): Dispatcher {
  return http.forUpstream({ name: config.provider, provider: config.provider });
}

/**
 * Builds each tool's provider from the configuration, over the core's one upstream dispatcher;
 * an unknown provider name throws at start.
 */
export function createToolProviders(config: SvcConfig, http: UpstreamHttp): ToolProviders {
  return {
    web_search: webSearch(config.tools.get('web_search'), http),
    maps_search_places: maps(config.tools.get('maps_search_places'), http),
    shopping_search: shopping(config.tools.get('shopping_search'), http),
  };
}
