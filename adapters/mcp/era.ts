import { HEADER_MISMATCH, INVALID_PARAMS, RpcFailure, UNSUPPORTED_PROTOCOL_VERSION, type RequestId } from './jsonrpc';
import { LEGACY_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from './negotiation';

/** The `_meta` keys of a 2026-07-28 request and result. */
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

/**
 * How one request is to be served: `modern` is 2026-07-28 (no handshake, everything in the
 * request); otherwise the legacy version the client named in its header, or none (a 2024-11-05
 * or 2025-03-26 client, which predates the header).
 */
export type Era =
  | { readonly modern: true; readonly version: string }
  | { readonly modern: false; readonly version: string | undefined };

/** The answer to a version svc does not speak: -32022 with the list, HTTP 400. */
export function unsupportedVersion(requested: string, id: RequestId | null): RpcFailure {
  return new RpcFailure(
    UNSUPPORTED_PROTOCOL_VERSION,
    `Unsupported protocol version "${requested}" (supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
    400,
    { supported: [...SUPPORTED_PROTOCOL_VERSIONS], requested },
    id,
  );
}

/** The request's `_meta` object, or an empty one. */
export function metaOf(params: Record<string, unknown>): Record<string, unknown> {
  const meta = params['_meta'];
  return meta !== null && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
}

/** A header that is missing or contradicts the body: HeaderMismatch (-32020), HTTP 400. */
export function headerMismatch(why: string, id: RequestId | null): RpcFailure {
  return new RpcFailure(HEADER_MISMATCH, `Header mismatch: ${why}`, 400, undefined, id);
}

function mismatch(why: string, id: RequestId): RpcFailure {
  return new RpcFailure(HEADER_MISMATCH, `Header mismatch: ${why}`, 400, undefined, id);
}

// Header values that are not plain ASCII arrive as `=?base64?…?=` (Streamable HTTP, value encoding).
function decodeHeaderValue(value: string): string | undefined {
  const encoded = /^=\?base64\?(.*)\?=$/i.exec(value);
  if (encoded === null) return /^[\x20-\x7e]*$/.test(value) ? value : undefined;
  const text = Buffer.from(encoded[1] ?? '', 'base64').toString('utf8');
  return Buffer.from(text, 'utf8').toString('base64').replace(/=+$/, '') === (encoded[1] ?? '').replace(/=+$/, '')
    ? text
    : undefined;
}

interface RequestView {
  readonly id: RequestId;
  readonly method: string;
  readonly params: Record<string, unknown>;
}

/**
 * Decides the era of one request from its `MCP-Protocol-Version` header and its `_meta`, and
 * enforces what 2026-07-28 requires of a request: the version in `_meta` equal to the header, the
 * client capabilities present, and `Mcp-Method` / `Mcp-Name` mirroring the body.
 */
export function eraOf(header: (name: string) => string, request: RequestView): Era {
  const headerVersion = header('mcp-protocol-version');
  const metaObject = metaOf(request.params);
  const metaVersion = metaObject[META_PROTOCOL_VERSION];
  if (metaVersion === undefined) {
    if (headerVersion === MODERN_PROTOCOL_VERSION) {
      throw new RpcFailure(
        INVALID_PARAMS,
        `Invalid params: a ${MODERN_PROTOCOL_VERSION} request needs "_meta"."${META_PROTOCOL_VERSION}"`,
        400,
        undefined,
        request.id,
      );
    }
    return { modern: false, version: headerVersion === '' ? undefined : headerVersion };
  }
  if (typeof metaVersion !== 'string') {
    throw new RpcFailure(
      INVALID_PARAMS,
      `Invalid params: "_meta"."${META_PROTOCOL_VERSION}" must be a string`,
      400,
      undefined,
      request.id,
    );
  }
  // Header and body disagreeing is a mismatch whatever the versions are; agreeing on one svc
  // does not speak is an unsupported version.
  if (headerVersion === '') throw mismatch('the MCP-Protocol-Version header is missing', request.id);
  if (headerVersion !== metaVersion) {
    throw mismatch(
      `MCP-Protocol-Version header value '${headerVersion}' does not match body value '${metaVersion}'`,
      request.id,
    );
  }
  if (!SUPPORTED_PROTOCOL_VERSIONS.includes(metaVersion)) throw unsupportedVersion(metaVersion, request.id);
  // A legacy version named in `_meta` too is still a legacy request (it was negotiated).
  if (LEGACY_PROTOCOL_VERSIONS.includes(metaVersion)) return { modern: false, version: metaVersion };

  const capabilities = metaObject[META_CLIENT_CAPABILITIES];
  if (capabilities === null || typeof capabilities !== 'object' || Array.isArray(capabilities)) {
    throw new RpcFailure(
      INVALID_PARAMS,
      `Invalid params: a ${MODERN_PROTOCOL_VERSION} request needs "_meta"."${META_CLIENT_CAPABILITIES}" (an object)`,
      400,
      undefined,
      request.id,
    );
  }
  const methodHeader = header('mcp-method');
  if (methodHeader === '') throw mismatch('the Mcp-Method header is missing', request.id);
  if (methodHeader !== request.method)
    throw mismatch(
      `Mcp-Method header value '${methodHeader}' does not match body value '${request.method}'`,
      request.id,
    );
  if (request.method === 'tools/call') {
    const name = request.params['name'];
    const nameHeader = header('mcp-name');
    if (nameHeader === '') throw mismatch('the Mcp-Name header is missing', request.id);
    const decoded = decodeHeaderValue(nameHeader);
    if (decoded === undefined) throw mismatch('the Mcp-Name header holds invalid characters', request.id);
    if (decoded !== name)
      throw mismatch(`Mcp-Name header value '${decoded}' does not match body value '${String(name)}'`, request.id);
  }
  return { modern: true, version: metaVersion };
}
