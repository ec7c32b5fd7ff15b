/*
 * The client's `anthropic-beta` header on the native pass-through path: the values that only
 * change how the upstream handles this one request (and are billed through its usage, which svc
 * charges) are forwarded; the rest are dropped, because svc's one upstream key is shared by
 * every account or the beta is billed outside svc's tariff:
 * - `context-1m-*`: Anthropic's long-context price above 200k tokens, which svc's tariff lacks;
 * - `files-api-*`, `skills-*`, `message-batches-*`: state in the shared upstream account;
 * - `mcp-client-*`, `code-execution-*`, `web-search-*`, `web-fetch-*`: tools Anthropic runs and bills
 *   itself (svc serves MCP and web search with its own wallet);
 * - `oauth-*`: another credential than svc's key.
 */

/** Betas forwarded to an `anthropic` upstream (Claude Code's, see ../shared/ref/clients/claude-code.md). */
export const FORWARDED_BETAS: ReadonlySet<string> = new Set([
  'claude-code-20250219',
  'interleaved-thinking-2025-05-14',
  'fine-grained-tool-streaming-2025-05-14',
  'token-efficient-tools-2025-02-19',
  'context-management-2025-06-27',
  'effort-2025-11-24',
  'thinking-token-count-2026-05-13',
  'mid-conversation-tool-changes-2026-07-01',
  'advanced-tool-use-2025-11-20',
  'output-128k-2025-02-19',
  'prompt-caching-2024-07-31',
  'computer-use-2025-01-24',
  'computer-use-2025-11-24',
]);

/**
 * The native headers of a Messages call: the allow-listed values of the client's `anthropic-beta`
 * header (a comma-separated list), or none.
 */
export function nativeHeaders(beta: string): Record<string, string> {
  const kept = beta
    .split(',')
    .map((v) => v.trim())
    .filter((v) => FORWARDED_BETAS.has(v));
  return kept.length === 0 ? {} : { 'anthropic-beta': kept.join(',') };
}
