import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { toJsonSchema, type JsonSchema, type ToolInput } from './schema';
import type { ToolConfig, ToolPrice, ToolProvider } from './types';

export type { JsonSchema } from './schema';

/** An icon of a tool, as MCP `Icon` (2025-11-25 and later). */
export interface ToolIcon {
  readonly src: string;
  readonly mimeType: string;
  readonly sizes: readonly string[];
}

/** What the tool may say beside its results, and when it is charged. */
export interface RefineContext {
  /** The current time in milliseconds, for recency filters. */
  readonly now: number;
}

/**
 * One upstream kind a tool can be configured with (`tools.<name>.provider`): what the config
 * loader needs to validate its entry, and how to build it.
 */
export interface ToolProviderKind<Args = unknown, Item = unknown> {
  /** Used when the entry has no `base_url`; absent means `base_url` is required (self-hosted). */
  readonly defaultBaseUrl?: string;
  readonly needsApiKey: boolean;
  /** Providers that run a model (perplexity) take `model`; for the others it is an error. */
  readonly defaultModel?: string;
  /** `dispatcher`: the core's one upstream dispatcher, under this provider's name. */
  create(config: ToolConfig, dispatcher: Dispatcher): ToolProvider<Args, Item>;
}

/**
 * One tool, declared in one module of core/tools/ and listed once in `catalog.ts`: everything
 * else (the names, `tools/list`, config validation, the built-in sandbox entry and its price,
 * the provider registry, the console's labels, MCP's instructions) is derived from it.
 *
 * Its zod input schema is the source of the JSON Schema in `tools/list`, of validation and of
 * the argument type; its output schema, of the `outputSchema`.
 */
export interface ToolSpec<Name extends string = string, Args = unknown, Item = unknown> {
  /** The wire name (MCP `tools/list`, `tools.<name>` in the config file, usage records). */
  readonly name: Name;
  readonly title: string;
  readonly description: string;
  /** A few words for MCP's server instructions, e.g. "places in Iran, nearest first". */
  readonly summary: string;
  /** The console's name for the tool, in each of its locales. */
  readonly labels: { readonly en: string; readonly fa: string };
  readonly input: ToolInput;
  readonly output: z.ZodType;
  readonly icons: readonly ToolIcon[];
  /** Raw arguments to the provider's: zod validation, then checks across arguments. Throws invalid_argument. */
  parse(raw: unknown): Args;
  /** Applies to the provider's items what the provider itself cannot (post-filters); keeps the order. */
  refine?(items: readonly Item[], args: Args, context: RefineContext): Item[];
  /** Extra structured fields derived from the arguments (the maps search point). */
  extra?(args: Args): Record<string, unknown>;
  /**
   * The upstreams it can be configured with, `sandbox` first: the offline provider a deployment
   * gets when its configuration does not name one (SPEC §4).
   */
  readonly providers: { readonly sandbox: ToolProviderKind<Args, Item> } & Readonly<
    Record<string, ToolProviderKind<Args, Item>>
  >;
  /** The price of the built-in sandbox tool; a configured provider has its own (`price`, required). */
  readonly sandboxPrice: ToolPrice;
}

/** A tool as listed: JSON Schemas made from its zod schemas. */
export interface ToolDefinitionSpec {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  readonly icons: readonly ToolIcon[];
}

/**
 * The structured content of every tool, so a model (and an operator) can always tell which
 * upstream answered and whether the data is the offline sandbox set.
 */
export function outputSchema<Item extends z.ZodType, Extra extends z.ZodRawShape>(
  providers: readonly string[],
  item: Item,
  extra: Extra,
) {
  return z.strictObject({
    query: z.string().describe('The query as searched.'),
    provider: z
      .string()
      .describe(`The upstream that answered: ${providers.map((p) => `"${p}"`).join(', ')}, or "sandbox".`),
    sandbox: z.boolean().describe('True when the results come from the offline sandbox dataset, not a live source.'),
    notice: z
      .string()
      .optional()
      .describe('Present on sandbox results, when nothing was found, and when a filter could not be applied.'),
    ...extra,
    results: z.array(item),
  });
}

/** The live providers of a tool (all but the sandbox), as its output schema names them. */
export function liveProviders(providers: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(providers).filter((name) => name !== 'sandbox');
}

/** An SVG icon as a data: URI, so clients need no request to svc to show it. */
export function svgIcon(paths: string): ToolIcon {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">${paths}</svg>`;
  return {
    src: `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`,
    mimeType: 'image/svg+xml',
    sizes: ['any'],
  };
}

/** The listing of a tool: its JSON Schemas, made once from its zod schemas. */
export function definitionOf(tool: ToolSpec): ToolDefinitionSpec {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: toJsonSchema(tool.input, 'input'),
    outputSchema: toJsonSchema(tool.output, 'output'),
    icons: tool.icons,
  };
}
