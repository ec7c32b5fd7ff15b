import type { InitializeResult, ListToolsResult } from '@modelcontextprotocol/sdk/types.js';
import { isSvcError } from '../../core/errors';
import { callCore, type CallMeta, type CoreClients } from '../http/core-client';
import { INVALID_PARAMS, METHOD_NOT_FOUND, RpcFailure } from './jsonrpc';
import { negotiateVersion } from './negotiation';
import { insufficientCreditResult, keyCapResult, toMcpResult, toMcpTool } from './tool-result';

const SERVER_INFO = { name: 'svc', title: 'svc search tools', version: '0.1.0' } as const;

const INSTRUCTIONS =
  'Search tools for Iran and the web: web_search (pages), maps_search_places (places in Iran, nearest first), ' +
  'shopping_search (Iranian shops, prices in toman). Each successful search is charged to your svc wallet; ' +
  'a failed or empty search costs nothing. Results are in structuredContent; _meta carries svc/cost and svc/balance_after.';

function invalidParams(message: string): RpcFailure {
  return new RpcFailure(INVALID_PARAMS, `Invalid params: ${message}`, 200);
}

// The tool list is the core's configuration, the same for every key; re-reading it on every
// tools/list would re-encode all the JSON schemas across the gRPC hop each time. The key is still
// checked on every call; the list itself is refreshed after this long.
const TOOL_LIST_TTL_MS = 30_000;

export type Dispatch = (meta: CallMeta, method: string, params: Record<string, unknown>) => Promise<unknown>;

/**
 * Builds the method dispatcher: it runs one JSON-RPC request against the core and returns its
 * `result`. Every method authenticates: tools/call inside the core call, the others through
 * AuthService (or ListTools when the cached tool list is stale).
 */
export function createDispatcher(core: CoreClients, now: () => number = Date.now): Dispatch {
  let tools: { result: ListToolsResult; fetchedAt: number } | undefined;

  async function listTools(meta: CallMeta): Promise<ListToolsResult> {
    if (tools !== undefined && now() - tools.fetchedAt < TOOL_LIST_TTL_MS) {
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      return tools.result;
    }
    const response = await callCore(meta, (options) => core.tools.listTools({}, options));
    tools = { result: { tools: response.tools.map(toMcpTool) }, fetchedAt: now() };
    return tools.result;
  }

  return (meta, method, params) => dispatch(core, meta, method, params, listTools);
}

async function dispatch(
  core: CoreClients,
  meta: CallMeta,
  method: string,
  params: Record<string, unknown>,
  listTools: (meta: CallMeta) => Promise<ListToolsResult>,
): Promise<unknown> {
  switch (method) {
    case 'initialize': {
      const requested = params['protocolVersion'];
      if (typeof requested !== 'string') throw invalidParams('initialize needs "protocolVersion" (a string)');
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      const result: InitializeResult = {
        protocolVersion: negotiateVersion(requested),
        capabilities: { tools: { listChanged: false } },
        serverInfo: SERVER_INFO,
        instructions: INSTRUCTIONS,
      };
      return result;
    }
    case 'ping':
      await callCore(meta, (options) => core.auth.authenticate({ scope: 'tools' }, options));
      return {};
    case 'tools/list':
      return listTools(meta);
    case 'tools/call': {
      const name = params['name'];
      const args = params['arguments'];
      if (typeof name !== 'string' || name === '') throw invalidParams('tools/call needs "name" (a string)');
      if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
        throw invalidParams('"arguments" must be an object');
      }
      try {
        const response = await callCore(meta, (options) =>
          core.tools.callTool(
            { name, ...(args !== undefined ? { arguments: args as Record<string, unknown> } : {}) },
            options,
          ),
        );
        return toMcpResult(response, meta.ids.current);
      } catch (error) {
        // Refused for credit is a tool result the model can read and relay, not a protocol error.
        if (isSvcError(error) && error.code === 'insufficient_credit')
          return insufficientCreditResult(error, name, meta.ids.current);
        if (isSvcError(error) && error.code === 'key_cap_exceeded') return keyCapResult(error, meta.ids.current);
        throw error;
      }
    }
    default:
      throw new RpcFailure(
        METHOD_NOT_FOUND,
        `Method not found: ${method} (svc serves initialize, ping, tools/list and tools/call)`,
        200,
      );
  }
}
