import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { SvcError } from '../../core';
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
 * - `svc/balance`, `svc/available`, `svc/price`: on `insufficient_credit`, the wallet balance, what
 *   is free of holds, and the credits the call needs;
 * - `svc/cap_limit` (`daily` or `monthly`), `svc/cap`, `svc/cap_spent`, `svc/cap_held`,
 *   `svc/price`, `svc/cap_resets_at` (ISO-8601): on `key_cap_exceeded`, the key's cap that was hit.
 * In `tools/list`, each tool's `_meta` carries `svc/price` and `svc/provider`.
 */
export const META_PREFIX = 'svc/';

function credits(value: bigint | undefined): number {
  return Number(value ?? 0n);
}

/** A core tool definition as an MCP `Tool`. */
export function toMcpTool(tool: ToolDefinition): Tool {
  const price = tool.price;
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
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

/** A core CallTool response as an MCP `CallToolResult`. */
export function toMcpResult(response: CallToolResponse, requestId: string): CallToolResult {
  const meta: Record<string, unknown> = {
    'svc/request_id': response.billing?.requestId || requestId,
    'svc/cost': credits(response.billing?.cost),
    'svc/provider': response.provider,
  };
  if (response.isError) {
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

/** The insufficient-credit refusal as a tool result a model can act on; nothing was charged. */
export function insufficientCreditResult(error: SvcError, tool: string, requestId: string): CallToolResult {
  const d = error.details ?? {};
  const num = (key: string): number | undefined =>
    typeof d[key] === 'number'
      ? d[key]
      : typeof d[key] === 'string' && /^-?\d+$/.test(d[key])
        ? Number(d[key])
        : undefined;
  const balance = num('balance');
  const available = num('available') ?? balance;
  const price = num('required');
  const held = num('held');
  const text =
    `Insufficient credit: ${tool} needs ${price ?? 'more'} credits, but the wallet has ${available ?? 'too few'} available` +
    (balance !== undefined
      ? ` (balance ${balance}${held !== undefined && held > 0 ? `, ${held} held by calls in progress` : ''})`
      : '') +
    '. Nothing was charged. Ask the account owner to top up the wallet, then retry.';
  return {
    content: [{ type: 'text', text }],
    isError: true,
    _meta: {
      'svc/request_id': requestId,
      'svc/cost': 0,
      'svc/error_code': 'insufficient_credit',
      ...(balance !== undefined ? { 'svc/balance': balance } : {}),
      ...(available !== undefined ? { 'svc/available': available } : {}),
      ...(price !== undefined ? { 'svc/price': price } : {}),
    },
  };
}

/** The refusal for the key's spend cap as a tool result: like an empty wallet, naming the limit. */
export function keyCapResult(error: SvcError, requestId: string): CallToolResult {
  const d = error.details ?? {};
  const pick = (key: string, as: string): Record<string, unknown> => (d[key] === undefined ? {} : { [as]: d[key] });
  return {
    content: [
      { type: 'text', text: `${error.message}. Nothing was charged. Ask the account owner to raise the key's cap.` },
    ],
    isError: true,
    _meta: {
      'svc/request_id': requestId,
      'svc/cost': 0,
      'svc/error_code': 'key_cap_exceeded',
      ...pick('limit', 'svc/cap_limit'),
      ...pick('cap', 'svc/cap'),
      ...pick('spent', 'svc/cap_spent'),
      ...pick('held', 'svc/cap_held'),
      ...pick('required', 'svc/price'),
      ...pick('resets_at', 'svc/cap_resets_at'),
    },
  };
}

/** Arguments that failed validation, as a tool result the model can correct from; nothing was charged. */
export function invalidArgumentResult(error: SvcError, requestId: string): CallToolResult {
  return {
    content: [{ type: 'text', text: `${error.message}. Nothing was charged; fix the arguments and call again.` }],
    isError: true,
    _meta: {
      'svc/request_id': requestId,
      'svc/cost': 0,
      'svc/error_code': 'invalid_argument',
      ...(error.param !== undefined ? { 'svc/param': error.param } : {}),
    },
  };
}
