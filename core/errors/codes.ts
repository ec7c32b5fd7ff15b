import { Status } from 'nice-grpc-common';

/** Stable string codes of the core's domain errors. They cross the wire in the `svc-error-code` trailer. */
export type ErrorCode =
  | 'missing_api_key'
  | 'invalid_api_key'
  | 'admin_required'
  | 'invalid_admin_token'
  | 'invalid_credentials'
  | 'session_expired'
  | 'csrf_failed'
  | 'permission_denied'
  | 'key_scope_denied'
  | 'insufficient_credit'
  | 'key_cap_exceeded'
  | 'rate_limited'
  | 'tokens_rate_limited'
  | 'concurrency_limited'
  | 'invalid_argument'
  | 'request_too_large'
  | 'unsupported_encoding'
  | 'model_not_found'
  | 'tool_not_found'
  | 'not_found'
  | 'idempotency_conflict'
  | 'upstream_invalid_request'
  | 'upstream_not_found'
  | 'upstream_rate_limited'
  | 'upstream_error'
  | 'upstream_unavailable'
  | 'upstream_timeout'
  | 'mcp_server_error'
  | 'cancelled'
  | 'unavailable'
  | 'internal'
  // Bad requests with OpenAI's own, more precise codes (400 like invalid_argument).
  | 'invalid_json'
  // A request body that does not decode by its Content-Encoding.
  | 'invalid_encoding'
  | 'invalid_type'
  | 'unknown_parameter'
  | 'unsupported_parameter'
  | 'unsupported_value'
  | 'decimal_above_max_value'
  | 'decimal_below_min_value'
  | 'integer_above_max_value'
  | 'integer_below_min_value'
  | 'context_length_exceeded';

/** How one error code looks in each protocol the service speaks. */
export interface ErrorMapping {
  readonly grpc: Status;
  readonly http: number;
  readonly openaiType: string;
  /** OpenAI `error.code`; null where OpenAI sends null. A string `details.upstream_code` replaces it. */
  readonly openaiCode: string | null;
  readonly jsonRpc: number;
  /** Anthropic's status and `error.type` (`{"type":"error","error":{type,message}}`). */
  readonly anthropic: { readonly http: number; readonly type: AnthropicErrorType };
  /** Google's status and `error.status` (`{"error":{code,message,status,details}}`), as the Gemini API answers. */
  readonly gemini: { readonly http: number; readonly status: GeminiErrorStatus };
}

/** The `error.status` values (google.rpc.Code names) the Gemini-compatible API answers with. */
export type GeminiErrorStatus =
  | 'INVALID_ARGUMENT'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'RESOURCE_EXHAUSTED'
  | 'CANCELLED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  | 'DEADLINE_EXCEEDED';

/** The `error.type` values of Anthropic's Messages API. */
export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'billing_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

const BAD_REQUEST = {
  grpc: Status.INVALID_ARGUMENT,
  http: 400,
  openaiType: 'invalid_request_error',
  jsonRpc: -32602,
  anthropic: { http: 400, type: 'invalid_request_error' },
  gemini: { http: 400, status: 'INVALID_ARGUMENT' },
} as const;

/**
 * The one table that maps core errors to gRPC status, HTTP status, OpenAI error type/code,
 * Anthropic status/type and JSON-RPC code. An empty wallet is Anthropic's 402 `billing_error`
 * (Claude Code shows its message and does not retry); an upstream that is down or rate-limits
 * svc is Anthropic's 529 `overloaded_error`, which its clients retry. Google answers a bad key with
 * 400 INVALID_ARGUMENT (not 401) and a missing one with 403 PERMISSION_DENIED; an empty wallet and a
 * rate limit are both its 429 RESOURCE_EXHAUSTED, told apart in `details` (adapters/gemini/errors.ts).
 * Adapters use only this table (through `mappingFor`).
 */
export const ERROR_TABLE: Readonly<Record<ErrorCode, ErrorMapping>> = {
  missing_api_key: {
    grpc: Status.UNAUTHENTICATED,
    http: 401,
    openaiType: 'invalid_request_error',
    openaiCode: 'missing_api_key',
    jsonRpc: -32001,
    anthropic: { http: 401, type: 'authentication_error' },
    gemini: { http: 403, status: 'PERMISSION_DENIED' },
  },
  invalid_api_key: {
    grpc: Status.UNAUTHENTICATED,
    http: 401,
    openaiType: 'invalid_request_error',
    openaiCode: 'invalid_api_key',
    jsonRpc: -32001,
    anthropic: { http: 401, type: 'authentication_error' },
    gemini: { http: 400, status: 'INVALID_ARGUMENT' },
  },
  invalid_admin_token: {
    grpc: Status.UNAUTHENTICATED,
    http: 401,
    openaiType: 'invalid_request_error',
    openaiCode: 'invalid_admin_token',
    jsonRpc: -32001,
    anthropic: { http: 401, type: 'authentication_error' },
    gemini: { http: 401, status: 'UNAUTHENTICATED' },
  },
  invalid_credentials: {
    grpc: Status.UNAUTHENTICATED,
    http: 401,
    openaiType: 'invalid_request_error',
    openaiCode: 'invalid_credentials',
    jsonRpc: -32001,
    anthropic: { http: 401, type: 'authentication_error' },
    gemini: { http: 401, status: 'UNAUTHENTICATED' },
  },
  session_expired: {
    grpc: Status.UNAUTHENTICATED,
    http: 401,
    openaiType: 'invalid_request_error',
    openaiCode: 'session_expired',
    jsonRpc: -32001,
    anthropic: { http: 401, type: 'authentication_error' },
    gemini: { http: 401, status: 'UNAUTHENTICATED' },
  },
  csrf_failed: {
    grpc: Status.PERMISSION_DENIED,
    http: 403,
    openaiType: 'invalid_request_error',
    openaiCode: 'csrf_failed',
    jsonRpc: -32003,
    anthropic: { http: 403, type: 'permission_error' },
    gemini: { http: 403, status: 'PERMISSION_DENIED' },
  },
  admin_required: {
    grpc: Status.PERMISSION_DENIED,
    http: 403,
    openaiType: 'invalid_request_error',
    openaiCode: 'admin_required',
    jsonRpc: -32003,
    anthropic: { http: 403, type: 'permission_error' },
    gemini: { http: 403, status: 'PERMISSION_DENIED' },
  },
  key_scope_denied: {
    grpc: Status.PERMISSION_DENIED,
    http: 403,
    openaiType: 'invalid_request_error',
    openaiCode: 'permission_denied',
    jsonRpc: -32003,
    anthropic: { http: 403, type: 'permission_error' },
    gemini: { http: 403, status: 'PERMISSION_DENIED' },
  },
  permission_denied: {
    grpc: Status.PERMISSION_DENIED,
    http: 403,
    openaiType: 'invalid_request_error',
    openaiCode: 'permission_denied',
    jsonRpc: -32003,
    anthropic: { http: 403, type: 'permission_error' },
    gemini: { http: 403, status: 'PERMISSION_DENIED' },
  },
  insufficient_credit: {
    grpc: Status.FAILED_PRECONDITION,
    http: 429,
    openaiType: 'insufficient_quota',
    openaiCode: 'insufficient_quota',
    jsonRpc: -32002,
    anthropic: { http: 402, type: 'billing_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  // Like an empty wallet (a retry cannot succeed before the period resets), with its own code.
  key_cap_exceeded: {
    grpc: Status.FAILED_PRECONDITION,
    http: 429,
    openaiType: 'insufficient_quota',
    openaiCode: 'key_cap_exceeded',
    jsonRpc: -32002,
    anthropic: { http: 402, type: 'billing_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  rate_limited: {
    grpc: Status.RESOURCE_EXHAUSTED,
    http: 429,
    openaiType: 'requests',
    openaiCode: 'rate_limit_exceeded',
    jsonRpc: -32029,
    anthropic: { http: 429, type: 'rate_limit_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  tokens_rate_limited: {
    grpc: Status.RESOURCE_EXHAUSTED,
    http: 429,
    openaiType: 'tokens',
    openaiCode: 'rate_limit_exceeded',
    jsonRpc: -32029,
    anthropic: { http: 429, type: 'rate_limit_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  // Calls in flight per key or per account (core/limits/concurrency.ts): each wire's rate-limit answer.
  concurrency_limited: {
    grpc: Status.RESOURCE_EXHAUSTED,
    http: 429,
    openaiType: 'requests',
    openaiCode: 'rate_limit_exceeded',
    jsonRpc: -32029,
    anthropic: { http: 429, type: 'rate_limit_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  invalid_argument: {
    grpc: Status.INVALID_ARGUMENT,
    http: 400,
    openaiType: 'invalid_request_error',
    openaiCode: 'invalid_value',
    jsonRpc: -32602,
    anthropic: { http: 400, type: 'invalid_request_error' },
    gemini: { http: 400, status: 'INVALID_ARGUMENT' },
  },
  request_too_large: {
    grpc: Status.INVALID_ARGUMENT,
    http: 413,
    openaiType: 'invalid_request_error',
    openaiCode: 'request_too_large',
    jsonRpc: -32600,
    anthropic: { http: 413, type: 'request_too_large' },
    gemini: { http: 400, status: 'INVALID_ARGUMENT' },
  },
  // A Content-Encoding svc does not decode: HTTP's 415 on every wire.
  unsupported_encoding: {
    grpc: Status.INVALID_ARGUMENT,
    http: 415,
    openaiType: 'invalid_request_error',
    openaiCode: 'unsupported_encoding',
    jsonRpc: -32600,
    anthropic: { http: 415, type: 'invalid_request_error' },
    gemini: { http: 415, status: 'INVALID_ARGUMENT' },
  },
  model_not_found: {
    grpc: Status.NOT_FOUND,
    http: 404,
    openaiType: 'invalid_request_error',
    openaiCode: 'model_not_found',
    jsonRpc: -32602,
    anthropic: { http: 404, type: 'not_found_error' },
    gemini: { http: 404, status: 'NOT_FOUND' },
  },
  tool_not_found: {
    grpc: Status.NOT_FOUND,
    http: 404,
    openaiType: 'invalid_request_error',
    openaiCode: 'tool_not_found',
    jsonRpc: -32602,
    anthropic: { http: 404, type: 'not_found_error' },
    gemini: { http: 404, status: 'NOT_FOUND' },
  },
  not_found: {
    grpc: Status.NOT_FOUND,
    http: 404,
    openaiType: 'invalid_request_error',
    openaiCode: 'not_found',
    jsonRpc: -32602,
    anthropic: { http: 404, type: 'not_found_error' },
    gemini: { http: 404, status: 'NOT_FOUND' },
  },
  idempotency_conflict: {
    grpc: Status.ALREADY_EXISTS,
    http: 409,
    openaiType: 'invalid_request_error',
    openaiCode: 'idempotency_key_reused',
    jsonRpc: -32600,
    anthropic: { http: 409, type: 'invalid_request_error' },
    gemini: { http: 409, status: 'ALREADY_EXISTS' },
  },
  // The upstream refused the client's request (context too long, a parameter the model does not
  // take): the client's own 400, never retried. The upstream's code rides in details.upstream_code.
  upstream_invalid_request: {
    grpc: Status.INVALID_ARGUMENT,
    http: 400,
    openaiType: 'invalid_request_error',
    openaiCode: null,
    jsonRpc: -32602,
    anthropic: { http: 400, type: 'invalid_request_error' },
    gemini: { http: 400, status: 'INVALID_ARGUMENT' },
  },
  // The model exists here; its provider does not know its upstream_model: svc's configuration is
  // wrong, not the client's request (OpenAI's clients would otherwise report a missing model).
  upstream_not_found: {
    grpc: Status.NOT_FOUND,
    http: 502,
    openaiType: 'server_error',
    openaiCode: 'upstream_error',
    jsonRpc: -32602,
    anthropic: { http: 404, type: 'not_found_error' },
    gemini: { http: 404, status: 'NOT_FOUND' },
  },
  // The upstream rate-limited svc: a 429 with retry-after (details.retry_after_s), retried later.
  upstream_rate_limited: {
    grpc: Status.RESOURCE_EXHAUSTED,
    http: 429,
    openaiType: 'requests',
    openaiCode: 'rate_limit_exceeded',
    jsonRpc: -32029,
    anthropic: { http: 529, type: 'overloaded_error' },
    gemini: { http: 429, status: 'RESOURCE_EXHAUSTED' },
  },
  upstream_error: {
    grpc: Status.UNAVAILABLE,
    http: 502,
    openaiType: 'server_error',
    openaiCode: 'upstream_error',
    jsonRpc: -32603,
    anthropic: { http: 500, type: 'api_error' },
    gemini: { http: 500, status: 'INTERNAL' },
  },
  upstream_unavailable: {
    grpc: Status.UNAVAILABLE,
    http: 503,
    openaiType: 'server_error',
    openaiCode: 'upstream_unavailable',
    jsonRpc: -32603,
    anthropic: { http: 529, type: 'overloaded_error' },
    gemini: { http: 503, status: 'UNAVAILABLE' },
  },
  upstream_timeout: {
    grpc: Status.DEADLINE_EXCEEDED,
    http: 504,
    openaiType: 'server_error',
    openaiCode: 'upstream_timeout',
    jsonRpc: -32603,
    anthropic: { http: 504, type: 'timeout_error' },
    gemini: { http: 504, status: 'DEADLINE_EXCEEDED' },
  },
  // The hosted `mcp` tool's server (the client chose it) could not list its tools: OpenAI's 424
  // external_connector_error. Nothing ran, nothing is charged.
  mcp_server_error: {
    grpc: Status.FAILED_PRECONDITION,
    http: 424,
    openaiType: 'external_connector_error',
    openaiCode: 'mcp_server_error',
    jsonRpc: -32603,
    anthropic: { http: 400, type: 'invalid_request_error' },
    gemini: { http: 400, status: 'INVALID_ARGUMENT' },
  },
  cancelled: {
    grpc: Status.CANCELLED,
    http: 499,
    openaiType: 'server_error',
    openaiCode: 'cancelled',
    jsonRpc: -32603,
    anthropic: { http: 499, type: 'api_error' },
    gemini: { http: 499, status: 'CANCELLED' },
  },
  unavailable: {
    grpc: Status.UNAVAILABLE,
    http: 503,
    openaiType: 'server_error',
    openaiCode: 'service_unavailable',
    jsonRpc: -32603,
    anthropic: { http: 529, type: 'overloaded_error' },
    gemini: { http: 503, status: 'UNAVAILABLE' },
  },
  internal: {
    grpc: Status.INTERNAL,
    http: 500,
    openaiType: 'server_error',
    openaiCode: null,
    jsonRpc: -32603,
    anthropic: { http: 500, type: 'api_error' },
    gemini: { http: 500, status: 'INTERNAL' },
  },
  invalid_json: { ...BAD_REQUEST, openaiCode: null },
  invalid_encoding: { ...BAD_REQUEST, openaiCode: 'invalid_encoding', jsonRpc: -32700 },
  invalid_type: { ...BAD_REQUEST, openaiCode: 'invalid_type' },
  unknown_parameter: { ...BAD_REQUEST, openaiCode: 'unknown_parameter' },
  unsupported_parameter: { ...BAD_REQUEST, openaiCode: 'unsupported_parameter' },
  unsupported_value: { ...BAD_REQUEST, openaiCode: 'unsupported_value' },
  decimal_above_max_value: { ...BAD_REQUEST, openaiCode: 'decimal_above_max_value' },
  decimal_below_min_value: { ...BAD_REQUEST, openaiCode: 'decimal_below_min_value' },
  integer_above_max_value: { ...BAD_REQUEST, openaiCode: 'integer_above_max_value' },
  integer_below_min_value: { ...BAD_REQUEST, openaiCode: 'integer_below_min_value' },
  context_length_exceeded: { ...BAD_REQUEST, openaiCode: 'context_length_exceeded' },
};

const byGrpcStatus = new Map<Status, ErrorCode>([
  [Status.UNAUTHENTICATED, 'invalid_api_key'],
  [Status.PERMISSION_DENIED, 'permission_denied'],
  [Status.INVALID_ARGUMENT, 'invalid_argument'],
  [Status.NOT_FOUND, 'not_found'],
  [Status.FAILED_PRECONDITION, 'insufficient_credit'],
  [Status.RESOURCE_EXHAUSTED, 'rate_limited'],
  [Status.ALREADY_EXISTS, 'idempotency_conflict'],
  [Status.UNAVAILABLE, 'unavailable'],
  [Status.DEADLINE_EXCEEDED, 'upstream_timeout'],
  [Status.CANCELLED, 'cancelled'],
]);

export function isErrorCode(value: string): value is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_TABLE, value);
}

/** The error code for a gRPC status that arrived without an `svc-error-code` trailer. */
export function codeForGrpcStatus(status: Status): ErrorCode {
  return byGrpcStatus.get(status) ?? 'internal';
}

export function mappingFor(code: ErrorCode): ErrorMapping {
  return ERROR_TABLE[code];
}
