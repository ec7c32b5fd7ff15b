import { isSvcError, mappingFor, SvcError } from '../../core/edge';
import { exceedsJsonDepth, MAX_JSON_DEPTH } from '../http/json-depth';

/** A JSON-RPC id as MCP allows it (no null). */
export type RequestId = string | number;

/** One incoming message, classified. */
export type Incoming =
  | {
      readonly kind: 'request';
      readonly id: RequestId;
      readonly method: string;
      readonly params: Record<string, unknown>;
    }
  /**
   * Notifications and responses: both answered 202 with no body. A notification keeps its method
   * and params (`notifications/cancelled` acts on them).
   */
  | { readonly kind: 'accepted'; readonly method?: string; readonly params?: Record<string, unknown> };

/**
 * A protocol error that crosses the wire: a JSON-RPC code and message, and the HTTP status of
 * the POST that carries it.
 */
export class RpcFailure extends Error {
  override readonly name = 'RpcFailure';
  constructor(
    readonly code: number,
    message: string,
    readonly httpStatus: number,
    readonly data?: Record<string, unknown>,
    readonly id: RequestId | null = null,
  ) {
    super(message);
  }
}

// JSON-RPC 2.0's own codes.
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
// MCP's own (2026-07-28 numbering).
export const HEADER_MISMATCH = -32020;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

function isId(value: unknown): value is RequestId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value));
}

/** Parses a POST body as JSON; a body that is not JSON is a parse error. */
export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    throw new RpcFailure(PARSE_ERROR, 'Parse error: the body is not valid JSON', 400);
  }
}

/** Parses one POST body into one JSON-RPC message; batches and malformed messages are refused. */
export function parseMessage(body: Buffer): Incoming {
  const value = parseJson(body);
  if (Array.isArray(value)) {
    throw new RpcFailure(
      INVALID_REQUEST,
      'Invalid Request: batches are not supported in this protocol version; send one JSON-RPC message per POST',
      400,
    );
  }
  return classify(value);
}

/**
 * Classifies one already-parsed JSON-RPC message (a POST body, or one member of a 2025-03-26
 * batch).
 */
export function classify(value: unknown): Incoming {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new RpcFailure(INVALID_REQUEST, 'Invalid Request: the body must be a JSON-RPC 2.0 object', 400);
  }
  if (exceedsJsonDepth(value)) {
    throw new RpcFailure(INVALID_REQUEST, `Invalid Request: JSON nested deeper than ${MAX_JSON_DEPTH} levels`, 400);
  }
  const message = value as Record<string, unknown>;
  const id = isId(message['id']) ? message['id'] : null;
  const invalid = (why: string): RpcFailure =>
    new RpcFailure(INVALID_REQUEST, `Invalid Request: ${why}`, 400, undefined, id);
  if (message['jsonrpc'] !== '2.0') throw invalid('"jsonrpc" must be "2.0"');
  const method = message['method'];
  if (method === undefined) {
    if (id !== null && ('result' in message || 'error' in message)) return { kind: 'accepted' };
    throw invalid('a request needs a "method"');
  }
  if (typeof method !== 'string' || method === '') throw invalid('"method" must be a non-empty string');
  const params = message['params'];
  if (params !== undefined && (params === null || typeof params !== 'object' || Array.isArray(params)))
    throw invalid('"params" must be an object');
  if (!('id' in message))
    return { kind: 'accepted', method, params: (params as Record<string, unknown> | undefined) ?? {} };
  if (id === null) throw invalid('"id" must be a string or an integer');
  return { kind: 'request', id, method, params: (params as Record<string, unknown> | undefined) ?? {} };
}

/** Turns any error into the RpcFailure the client sees; internal detail never leaks. */
export function toRpcFailure(error: unknown, id: RequestId | null): RpcFailure {
  if (error instanceof RpcFailure)
    return error.id === null && id !== null
      ? new RpcFailure(error.code, error.message, error.httpStatus, error.data, id)
      : error;
  const svc = isSvcError(error) ? error : new SvcError('internal', 'Internal error');
  const mapping = mappingFor(svc.code);
  // Transport-level refusals keep their HTTP status; everything else rides a 200 as a JSON-RPC error.
  // A body that does not decode is a parse error, with HTTP's 400 like invalid JSON.
  const httpStatus =
    [401, 403, 413, 415, 429].includes(mapping.http) || svc.code === 'invalid_encoding' ? mapping.http : 200;
  // Errors raised below the core's own handlers (a lost channel, a cancelled call) carry gRPC's
  // wording; say it in ours instead.
  const message =
    svc.code === 'internal'
      ? 'Internal error'
      : svc.code === 'unavailable'
        ? 'svc is temporarily unavailable; try again in a moment'
        : svc.code === 'cancelled'
          ? 'The request was cancelled'
          : svc.message;
  const data: Record<string, unknown> = {
    code: svc.code,
    ...(svc.param !== undefined ? { param: svc.param } : {}),
    ...(svc.details ?? {}),
  };
  return new RpcFailure(mapping.jsonRpc, message, httpStatus, data, id);
}

/**
 * A failure as a JSON-RPC error response object. An unreadable id is `null` as JSON-RPC 2.0 says,
 * or left out where the protocol version says so (2026-07-28 has no null id).
 */
export function errorObject(failure: RpcFailure, omitNullId = false): object {
  const error = {
    code: failure.code,
    message: failure.message,
    ...(failure.data !== undefined ? { data: failure.data } : {}),
  };
  return failure.id === null && omitNullId ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id: failure.id, error };
}

export function errorMessage(failure: RpcFailure, omitNullId = false): string {
  return JSON.stringify(errorObject(failure, omitNullId));
}
