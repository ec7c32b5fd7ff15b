import type { ToolSpec } from './definitions';
import { MAPS_SEARCH_PLACES } from './maps-search-places';
import { SHOPPING_SEARCH } from './shopping-search';
import { WEB_SEARCH } from './web-search';

export { MAPS_SEARCH_PLACES, SHOPPING_SEARCH, WEB_SEARCH };

/** Every tool svc serves, in the order `tools/list` shows them. A new tool is added here. */
export const TOOLS: readonly ToolSpec<never, never>[] = [
  WEB_SEARCH as unknown as ToolSpec<never, never>,
  MAPS_SEARCH_PLACES as unknown as ToolSpec<never, never>,
  SHOPPING_SEARCH as unknown as ToolSpec<never, never>,
];
