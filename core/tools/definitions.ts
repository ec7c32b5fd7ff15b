import { z } from 'zod';
import { toJsonSchema, type JsonSchema, type ToolInput } from './schema';
import type { ToolName } from './types';

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
 * One tool: its zod input schema (the source of the JSON Schema in `tools/list`, of validation
 * and of the argument type), its output schema, and how its arguments reach its provider.
 */
export interface ToolSpec<Args = unknown, Item = unknown> {
  readonly name: ToolName;
  readonly title: string;
  readonly description: string;
  readonly input: ToolInput;
  readonly output: z.ZodType;
  readonly icons: readonly ToolIcon[];
  /** Raw arguments to the provider's: zod validation, then checks across arguments. Throws invalid_argument. */
  parse(raw: unknown): Args;
  /** Applies to the provider's items what the provider itself cannot (post-filters); keeps the order. */
  refine?(items: readonly Item[], args: Args, context: RefineContext): Item[];
  /** Extra structured fields derived from the arguments (the maps search point). */
  extra?(args: Args): Record<string, unknown>;
}

/** A tool as listed: JSON Schemas made from its zod schemas. */
export interface ToolDefinitionSpec {
  readonly name: ToolName;
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
export function definitionOf(tool: ToolSpec<never, never>): ToolDefinitionSpec {
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: toJsonSchema(tool.input, 'input'),
    outputSchema: toJsonSchema(tool.output, 'output'),
    icons: tool.icons,
  };
}
