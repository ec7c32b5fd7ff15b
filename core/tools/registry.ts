import type { SvcConfig, ToolConfig } from '../config/types';
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

function webSearch(config: ToolConfig | undefined): WebSearchProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxWebSearch();
  if (config.provider === 'perplexity') return createPerplexityProvider(config);
  if (config.provider === 'searxng') return createSearxngProvider(config);
  throw unknownProvider(config);
}

function maps(config: ToolConfig | undefined): MapsProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxMaps();
  if (config.provider === 'neshan') return createNeshanProvider(config);
  if (config.provider === 'nominatim') return createNominatimProvider(config);
  throw unknownProvider(config);
}

function shopping(config: ToolConfig | undefined): ShoppingProvider {
  if (config === undefined || config.provider === 'sandbox') return createSandboxShopping();
  if (config.provider === 'torob') return createTorobProvider(config);
  if (config.provider === 'digikala') return createDigikalaProvider(config);
  throw unknownProvider(config);
}

/** Builds each tool's provider from the configuration; an unknown provider name throws at start. */
export function createToolProviders(config: SvcConfig): ToolProviders {
  return {
    web_search: webSearch(config.tools.get('web_search')),
    maps_search_places: maps(config.tools.get('maps_search_places')),
    shopping_search: shopping(config.tools.get('shopping_search')),
  };
}
