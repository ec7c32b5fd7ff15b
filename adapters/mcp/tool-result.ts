import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { CallToolResponse, ToolDefinition } from '../../gen/svc/core/v1/tools';

/**
 * Keys svc puts in `_meta` of every `tools/call` result (all numbers are whole credits):
 * - `svc/request_id`: the request id (also the `x-request-id` header, the ledger entry, the trace);
 * - `svc/cost`: credits charged for this call (0 when it failed, found nothing or was refused);
 * - `svc/balance_after`: the wallet balance right after the charge (on successful calls);
 * - `svc/provider`: the upstream that served the call ("sandbox" for offline sample data);
 * - `svc/error_code`: on `isError` results, a stable machine-readable code
 *   (`invalid_argument`, `insufficient_credit`, `key_cap_exceeded`, `upstream_error`,
 *   `upstream_unavailable`, `upstream_timeout`);
 * - `svc/param`: on `invalid_argument`, the argument at fault;
 * - `svc/balance`, `svc/held`, `svc/available`, `svc/price`: on `insufficient_credit`, the wallet
 *   balance, what calls in progress hold, what is free of holds, and the credits the call needs;
 * - `svc/cap_limit` (`daily` or `monthly`), `svc/cap`, `svc/cap_spent`, `svc/cap_held`,
 *   `svc/price`, `svc/cap_resets_at` (ISO-8601): on `key_cap_exceeded`, the key's cap that was hit.
 * In `tools/list`, each tool's `_meta` carries `svc/price` and `svc/provider`.
 */
export const META_PREFIX = 'svc/';

function credits(value: bigint | undefined): number {
  return Number(value ?? 0n);
}

/** A core tool definition as an MCP `Tool`; `icons` only where the version has them (2025-11-25 on). */
export function toMcpTool(tool: ToolDefinition, withIcons: boolean): Tool {
  const price = tool.price;
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    ...(withIcons && tool.icons.length > 0
      ? { icons: tool.icons.map((icon) => ({ src: icon.src, mimeType: icon.mimeType, sizes: [...icon.sizes] })) }
      : {}),
    inputSchema: tool.inputSchema as Tool['inputSchema'],
    outputSchema: tool.outputSchema as NonNullable<Tool['outputSchema']>,
    annotations: {
      title: tool.title,
      readOnlyHint: tool.annotations?.readOnlyHint ?? true,
      destructiveHint: tool.annotations?.destructiveHint ?? false,
      idempotentHint: tool.annotations?.idempotentHint ?? false,
      openWorldHint: tool.annotations?.openWorldHint ?? true,
    },
    _meta: {
      'svc/price':
        price === undefined || price.flat > 0n
          ? { flat: credits(price?.flat) }
          : { input_per_1m: credits(price.inputPer1m), output_per_1m: credits(price.outputPer1m) },
      'svc/provider': tool.provider,
    },
  };
}

/**
 * A core CallTool response as an MCP `CallToolResult`, mechanically: the core's text is the
 * content, its error code and each of its error details go to `_meta` under `svc/`, and the cost
 * comes from the response's billing (a refused or failed call has none: 0).
 */
export function toMcpResult(response: CallToolResponse, requestId: string): CallToolResult {
  const meta: Record<string, unknown> = {
    'svc/request_id': response.billing?.requestId || requestId,
    'svc/cost': credits(response.billing?.cost),
    'svc/provider': response.provider,
  };
  if (response.isError) {
    for (const [key, value] of Object.entries(response.errorDetails ?? {})) meta[`${META_PREFIX}${key}`] = value;
    return {
      content: [{ type: 'text', text: response.text }],
      isError: true,
      _meta: { ...meta, 'svc/error_code': response.errorCode },
    };
  }
  meta['svc/balance_after'] = credits(response.billing?.balanceAfter);
  return {
    content: [{ type: 'text', text: response.text }],
    structuredContent: response.structuredContent ?? {},
    isError: false,
    _meta: meta,
  };
}
