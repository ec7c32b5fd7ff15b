import type { ToolSpec } from './definitions';
import type { ToolConfig } from './types';
import { MAPS_SEARCH_PLACES } from './maps-search-places';
import { SHOPPING_SEARCH } from './shopping-search';
import { WEB_SEARCH } from './web-search';

export { MAPS_SEARCH_PLACES, SHOPPING_SEARCH, WEB_SEARCH };

/**
 * Every tool svc serves, in the order `tools/list` shows them: the one list a new tool module is
 * added to. The names, the config loader's checks, the built-in sandbox tools and their prices,
 * the provider registry, `tools/list`, MCP's instructions and the console's labels all come from it.
 */
export const TOOLS = [WEB_SEARCH, MAPS_SEARCH_PLACES, SHOPPING_SEARCH] as const;

/** The name of a tool svc serves. */
export type ToolName = (typeof TOOLS)[number]['name'];

/** The tool names, in list order. */
export const TOOL_NAMES: readonly ToolName[] = TOOLS.map((tool) => tool.name);

/** Every tool, seen through the shape they share. */
export const TOOL_SPECS: readonly ToolSpec[] = TOOLS;

/** The tool of that name, or undefined. */
export function toolNamed(name: string): ToolSpec | undefined {
  return TOOL_SPECS.find((tool) => tool.name === name);
}

/** A tool provider's timeout when its entry sets none (`timeout_ms`). */
export const DEFAULT_TOOL_TIMEOUT_MS = 15_000;

/** The built-in entry of a tool: its sandbox provider at its sandbox price. */
export function sandboxConfig(tool: ToolSpec): ToolConfig {
  return {
    name: tool.name,
    provider: 'sandbox',
    baseUrl: '',
    apiKey: undefined,
    model: undefined,
    price: tool.sandboxPrice,
    timeoutMs: DEFAULT_TOOL_TIMEOUT_MS,
  };
}

/** What the adapters may show of a tool without asking the core: its name and its words. */
export interface ToolCatalogEntry {
  readonly name: string;
  readonly title: string;
  readonly summary: string;
  readonly labels: ToolSpec['labels'];
}

/** The static part of the tool list, for the adapters (MCP instructions, console labels). */
export const TOOL_CATALOG: readonly ToolCatalogEntry[] = TOOL_SPECS.map(({ name, title, summary, labels }) => ({
  name,
  title,
  summary,
  labels,
}));
