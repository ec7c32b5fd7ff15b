import type { Model } from '../../gen/svc/core/v1/models';

/*
 * Gemini CLI names Google's models in calls of its own (the prompt classifier on
 * `gemini-3.5-flash-lite`, turns on `gemini-3.8-flash`, `google_web_search` on
 * `gemini-3-flash-preview`, fallbacks on others), whatever model the user set. Such a name reaches
 * a configured model in this order:
 *
 * 1. a model configured under that very name (an operator may serve `gemini-2.5-pro` itself);
 * 2. the alias table the gateway was given (`GeminiAliases.table`; the lead can feed it from the
 *    configuration's `aliases:` key);
 * 3. any other `gemini-*` name: the default target, which is the table's `default` entry when it
 *    has one, else the first model the account may use (`GET models` order: the configuration's
 *    first model; `svc-pro` in the built-in configuration).
 *
 * Any other unknown name stays as it is and is the usual 404 NOT_FOUND.
 */

/** Aliases for the Gemini API's model names. */
export interface GeminiAliases {
  /** Requested name → configured model id; the key `default` names the target of other `gemini-*` names. */
  readonly table: ReadonlyMap<string, string>;
}

/** Gemini CLI 0.61's internal model names (see ref/clients/gemini-cli.md); all go to the default target. */
export const GEMINI_CLI_MODELS: readonly string[] = [
  'gemini-3.5-flash-lite',
  'gemini-3.8-flash',
  'gemini-3-flash-preview',
];

/** No aliases: every Gemini CLI name goes to the default target. */
export const NO_ALIASES: GeminiAliases = { table: new Map() };

const GOOGLE_NAME = /^gemini-/;

/**
 * The configured model `requested` names, given the lookups it needs (called only for names that
 * could be aliases, so an ordinary request costs no extra call).
 */
export async function resolveModel(
  requested: string,
  aliases: GeminiAliases,
  lookup: { exists(id: string): Promise<boolean>; first(): Promise<Model | undefined> },
): Promise<string> {
  const aliased = aliases.table.get(requested);
  if (aliased === undefined && !GOOGLE_NAME.test(requested)) return requested;
  if (await lookup.exists(requested)) return requested;
  if (aliased !== undefined) return aliased;
  const fallback = aliases.table.get('default');
  if (fallback !== undefined) return fallback;
  return (await lookup.first())?.id ?? requested;
}
