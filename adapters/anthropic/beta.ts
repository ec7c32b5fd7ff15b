/*
 * The client's `anthropic-beta` header (SPEC §13: "Anthropic beta features the client names in
 * `anthropic-beta` reach an `anthropic` upstream unchanged; on a translated model a beta that
 * changes the answer's shape is refused naming it, the rest are accepted and named in
 * `x-svc-ignored-fields`").
 *
 * To an `anthropic` upstream (the native path and its fast path) every value goes as the client
 * wrote it, new and unknown betas included, except those withheld because svc's one upstream key
 * is shared by every account or the beta is billed outside svc's tariff; a withheld beta is named
 * in `x-svc-ignored-fields`, never dropped silently:
 * - `context-1m-*`: Anthropic's long-context price above 200k tokens, which svc's tariff lacks;
 * - `files-api-*`, `skills-*`, `message-batches-*`: state in the shared upstream account;
 * - `mcp-client-*`, `code-execution-*`, `web-search-*`, `web-fetch-*`: tools Anthropic runs and bills
 *   itself (svc serves MCP and web search with its own wallet);
 * - `oauth-*`: another credential than svc's key.
 *
 * On a translated model (a chat, Responses or Gemini upstream) no beta reaches the upstream. Those
 * that change the shape of the answer (content blocks or a format the translation cannot produce)
 * are refused with a 400 naming the beta (they ride in `native_only`, which the core refuses for a
 * translated model); the others (thinking, caching, streaming, context-management and effort
 * betas, Claude Code's own) change nothing a translated answer could show, and are named in
 * `x-svc-ignored-fields`.
 */

/** Betas withheld from an `anthropic` upstream (by name prefix, the date left off). */
export const WITHHELD_BETAS: readonly string[] = [
  'context-1m-',
  'files-api-',
  'skills-',
  'message-batches-',
  'mcp-client-',
  'code-execution-',
  'web-search-',
  'web-fetch-',
  'oauth-',
];

/**
 * Betas that change the answer's shape (by name prefix), refused on a translated model:
 * structured outputs (a JSON answer to a schema), server tools whose calls and results are
 * content blocks of their own (code execution, web fetch, MCP connector, skills, files), search
 * result blocks with citations, and computer use (its tool calls are actions, not functions).
 */
export const SHAPE_CHANGING_BETAS: readonly string[] = [
  'structured-outputs-',
  'code-execution-',
  'web-fetch-',
  'mcp-client-',
  'skills-',
  'files-api-',
  'search-results-',
  'computer-use-',
];

/** The client's betas, read once. */
export interface ClientBetas {
  /** The native headers of a Messages call: `anthropic-beta` as the client sent it, minus the withheld. */
  readonly headers: Record<string, string>;
  /** Withheld from an `anthropic` upstream, as `anthropic-beta:NAME` (for `x-svc-ignored-fields`). */
  readonly withheld: string[];
  /** Refused on a translated model, as `anthropic-beta:NAME` (`native_only`). */
  readonly nativeOnly: string[];
  /** Accepted and not carried by a translation, as `anthropic-beta:NAME`. */
  readonly ignored: string[];
}

const named = (value: string): string => `anthropic-beta:${value}`;
const matches = (prefixes: readonly string[], value: string): boolean => prefixes.some((p) => value.startsWith(p));

/** Reads the client's `anthropic-beta` header (a comma-separated list). */
export function clientBetas(header: string): ClientBetas {
  const values = header
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
  const withheld = values.filter((v) => matches(WITHHELD_BETAS, v));
  const forwarded = withheld.length === 0 ? header.trim() : values.filter((v) => !withheld.includes(v)).join(',');
  return {
    headers: forwarded === '' ? {} : { 'anthropic-beta': forwarded },
    withheld: withheld.map(named),
    nativeOnly: values.filter((v) => matches(SHAPE_CHANGING_BETAS, v)).map(named),
    ignored: values.filter((v) => !matches(SHAPE_CHANGING_BETAS, v)).map(named),
  };
}
