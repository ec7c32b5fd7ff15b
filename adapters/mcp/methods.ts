import type { InitializeResult, ListToolsResult } from '@modelcontextprotocol/sdk/types.js';
import { TOOL_CATALOG } from '../../core/edge';
import type { ToolDefinition } from '../../gen/svc/core/v1/tools';
import { callCore, type CallMeta, type CoreClients } from '../http/core-client';
import { META_SERVER_INFO, type Era } from './era';
import { INVALID_PARAMS, METHOD_NOT_FOUND, RpcFailure } from './jsonrpc';
import { negotiateVersion, SUPPORTED_PROTOCOL_VERSIONS, versionAtLeast } from './negotiation';
import { toMcpResult, toMcpTool } from './tool-result';

const SERVER_INFO = { name: 'svc', title: 'svc search tools', version: '0.1.0' } as const;
const SERVER_DESCRIPTION = 'Search tools for Iran and the web, billed per successful call to an svc wallet.';

// `description`, `websiteUrl` and `icons` joined Implementation and Tool in 2025-11-25.
const hasIcons = (version: string | undefined): boolean =>
  version !== undefined && versionAtLeast(version, '2025-11-25');

function serverInfo(version: string | undefined, websiteUrl: string | undefined): Record<string, unknown> {
  return hasIcons(version)
    ? { ...SERVER_INFO, description: SERVER_DESCRIPTION, ...(websiteUrl !== undefined ? { websiteUrl } : {}) }
    : SERVER_INFO;
}

// Each tool in a few words, from the tool list (a new tool is named here without an edit).
const INSTRUCTIONS =
  `Search tools for Iran and the web: ${TOOL_CATALOG.map((t) => `${t.name} (${t.summary})`).join(', ')}. ` +
  'Each successful search is charged to your svc wallet; a failed or empty search costs nothing. ' +
  'Results are in structuredContent; _meta carries svc/cost and svc/balance_after.';

function invalidParams(message: string): RpcFailure {
  return new RpcFailure(INVALID_PARAMS, `Invalid params: ${message}`, 200);
}

// The tool list is the core's configuration, the same for every key; re-reading it on every
// tools/list would re-encode all the JSON schemas across the gRPC hop each time. The key is still
// checked on every call; the list itself is refreshed after this long.
const TOOL_LIST_TTL_MS = 30_000;

export type Dispatch = (
  meta: CallMeta,
  method: string,
  params: Record<string, unknown>,
  era: Era,
) => Promise<Record<string, unknown>>;

/**
 * Builds the method dispatcher: it runs one JSON-RPC request against the core and returns its
 * `result`. Every method authenticates: tools/call inside the core call, the others through
 * AuthService (or ListTools when the cached tool list is stale).
 */
export function createDispatcher(
  core: CoreClients,
  options: { readonly now?: () => number; readonly websiteUrl?: string | undefined } = {},
): Dispatch {
  // No list is kept here: the core lists the tools the caller's key may use, which differ by
  // key, and one ListTools call costs the same round trip as the authentication it replaces.
  async function definitions(meta: CallMeta): Promise<readonly ToolDefinition[]> {
    return (await callCore(meta, (o) => core.tools.listTools({}, o))).tools;
  }

  return async (meta, method, params, era) => {
    const listTools = async (m: CallMeta): Promise<ListToolsResult> => {
      const withIcons = hasIcons(era.version);
      return { tools: (await definitions(m)).map((t) => toMcpTool(t, withIcons)) };
    };
    const info = (version: string | undefined) => serverInfo(version, options.websiteUrl);
    if (!era.modern) return dispatch(core, meta, method, params, listTools, info);
    const result = await dispatchModern(core, meta, method, params, listTools);
    // Stateless: each result names its server, since no handshake did.
    const resultMeta = (result['_meta'] as Record<string, unknown> | undefined) ?? {};
    return {
      ...result,
      resultType: 'complete',
      _meta: { ...resultMeta, [META_SERVER_INFO]: info(era.version) },
    };
  };
}

const MODERN_METHODS = ['server/discover', 'tools/list', 'tools/call'];

async function dispatchModern(
  core: CoreClients,
  meta: CallMeta,
  method: string,
  params: Record<string, unknown>,
  listTools: (meta: CallMeta) => Promise<ListToolsResult>,
): Promise<Record<string, unknown>> {
  switch (method) {
    case 'server/discover':
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      return {
        supportedVersions: [...SUPPORTED_PROTOCOL_VERSIONS],
        capabilities: { tools: { listChanged: false } },
        instructions: INSTRUCTIONS,
        ttlMs: TOOL_LIST_TTL_MS,
        cacheScope: 'public',
      };
    case 'tools/list':
      // A key limited to some tools sees only those: no shared cache may hand this list to another key.
      return { ...(await listToolsChecked(meta, params, listTools)), ttlMs: TOOL_LIST_TTL_MS, cacheScope: 'private' };
    case 'tools/call':
      return callTool(core, meta, params);
    default:
      // Modern servers answer an unknown method (ping, initialize, logging/setLevel included) 404.
      throw new RpcFailure(
        METHOD_NOT_FOUND,
        `Method not found: ${method} (in protocol 2026-07-28 svc serves ${MODERN_METHODS.join(', ')})`,
        404,
      );
  }
}

async function listToolsChecked(
  meta: CallMeta,
  params: Record<string, unknown>,
  listTools: (meta: CallMeta) => Promise<ListToolsResult>,
): Promise<ListToolsResult> {
  // One page holds every tool, so no cursor svc could have handed out exists.
  if (params['cursor'] !== undefined)
    throw invalidParams(`unknown cursor ${JSON.stringify(params['cursor'])}: svc lists every tool in one page`);
  return listTools(meta);
}

async function callTool(
  core: CoreClients,
  meta: CallMeta,
  params: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const name = params['name'];
  const args = params['arguments'];
  if (typeof name !== 'string' || name === '') throw invalidParams('tools/call needs "name" (a string)');
  if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
    throw invalidParams('"arguments" must be an object');
  }
  // Bad arguments, refusals for credit or the key's cap and provider failures are isError results
  // from the core (2025-11-25: the model reads why and corrects itself); an unknown tool is -32602.
  const response = await callCore(meta, (options) =>
    core.tools.callTool(
      { name, ...(args !== undefined ? { arguments: args as Record<string, unknown> } : {}) },
      options,
    ),
  );
  return toMcpResult(response, meta.ids.current);
}

async function dispatch(
  core: CoreClients,
  meta: CallMeta,
  method: string,
  params: Record<string, unknown>,
  listTools: (meta: CallMeta) => Promise<ListToolsResult>,
  info: (version: string) => Record<string, unknown>,
): Promise<Record<string, unknown>> {
  switch (method) {
    case 'initialize': {
      const requested = params['protocolVersion'];
      if (typeof requested !== 'string') throw invalidParams('initialize needs "protocolVersion" (a string)');
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      const version = negotiateVersion(requested);
      const result: InitializeResult = {
        protocolVersion: version,
        capabilities: { tools: { listChanged: false } },
        serverInfo: info(version) as InitializeResult['serverInfo'],
        instructions: INSTRUCTIONS,
      };
      return result;
    }
    case 'ping':
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      return {};
    case 'tools/list':
      return listToolsChecked(meta, params, listTools);
    case 'tools/call':
      return callTool(core, meta, params);
    default:
      throw new RpcFailure(
        METHOD_NOT_FOUND,
        `Method not found: ${method} (svc serves initialize, ping, tools/list and tools/call; ` +
          `server/discover with protocol 2026-07-28)`,
        200,
      );
  }
}
