import { createHash } from 'node:crypto';
import type * as McpClient from '@modelcontextprotocol/sdk/client/index.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type * as McpStreamableHttp from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type * as McpTypes from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { invalidArgument, SvcError } from '../../errors';
import { GuardedFetchError, guardedFetch, type Resolver } from '../../net/guarded-fetch';
import type { JsonObject, WireToolCall } from '../../providers/llm/types';
import { TOOL_NAME_RE } from '../prepare';

/*
 * The hosted `mcp` tool of the Responses API (SPEC §7d): svc is the MCP client. Before anything
 * is held it lists the tools of every `mcp` tool's server (MCP over Streamable HTTP), offers them
 * to the model as functions `mcp__<server_label>__<tool>`, and runs each call the model makes on
 * that server between model turns, in the hosted loop (hosted-loop.ts).
 *
 * - Every connection goes through the guarded fetcher (core/net/guarded-fetch.ts): https only, no
 *   internal address, no redirect, a size cap and a deadline per HTTP exchange. The test switch
 *   `responses.mcp_insecure_servers` allows http and loopback/private addresses.
 * - The client's `headers` (and `authorization`) are sent to that server only, never echoed,
 *   logged or stored.
 * - Each operation (the listing, each call) opens its own MCP session and closes it: nothing
 *   stays open between a request's prepare and its turns, whatever becomes of the request.
 * - A server that cannot list its tools fails the request before anything is held (424
 *   `mcp_server_error`: nothing ran, nothing is charged). A call that fails becomes the
 *   `mcp_call` item's `error` and the model reads it and goes on, as at OpenAI.
 * - The remote calls cost nothing at svc (the server bills its own); only the model turns do.
 */

type Obj = JsonObject;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Bytes one MCP HTTP answer may carry (a tools/list of a large server fits). */
export const MCP_MAX_BYTES = 1024 * 1024;
/** The deadline of one MCP HTTP exchange. */
export const MCP_TIMEOUT_MS = 15_000;
/** Pages of tools/list read at most. */
const MAX_LIST_PAGES = 10;

/** One `mcp` tool of the request, validated. */
export interface McpServerSpec {
  /** Index in `tools`, for the 400s. */
  readonly index: number;
  readonly label: string;
  readonly url: string;
  /** Sent to this server only; never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** `allowed_tools`; undefined: every tool. */
  readonly allowed?: ReadonlySet<string>;
  /** Tools `require_approval.never.tool_names` names; undefined: `"never"` (every tool). */
  readonly never?: ReadonlySet<string>;
  /** Tools `require_approval.always.tool_names` names. */
  readonly always: ReadonlySet<string>;
}

/** A tool a server listed, as the `mcp_list_tools` item carries it. */
export interface McpTool {
  readonly name: string;
  readonly description: string | null;
  readonly input_schema: Obj;
  readonly annotations: Obj | null;
}

/** A server's listing: what the model is offered. */
export interface McpListing {
  readonly spec: McpServerSpec;
  readonly tools: readonly McpTool[];
}

export interface McpOptions {
  /** `responses.mcp_insecure_servers`: http and loopback/private addresses allowed (tests only). */
  readonly insecure: boolean;
  readonly logger: Logger;
  /** Tests: name resolution. */
  readonly resolve?: Resolver;
}

const strings = (value: unknown, at: string): Set<string> => {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw invalidArgument(at, `Invalid '${at}': expected an array of tool names.`);
  return new Set(value as string[]);
};

const LABEL_RE = /^[A-Za-z0-9_-]{1,40}$/;

/** Validates one `{"type": "mcp", …}` tool (400s name the field); nothing is fetched. */
export function mcpSpec(tool: Obj, index: number): McpServerSpec {
  const at = `tools[${index}]`;
  const label = tool['server_label'];
  if (typeof label !== 'string' || !LABEL_RE.test(label))
    throw invalidArgument(
      `${at}.server_label`,
      `Invalid '${at}.server_label': expected 1-40 characters of a-z, A-Z, 0-9, underscores and dashes.`,
    );
  if (tool['connector_id'] !== undefined && tool['connector_id'] !== null)
    throw new SvcError('unsupported_parameter', `Unsupported parameter: '${at}.connector_id': connectors are not served here; give a server_url.`, {
      param: `${at}.connector_id`,
    });
  const url = tool['server_url'];
  let parsed: URL | undefined;
  try {
    parsed = typeof url === 'string' ? new URL(url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:'))
    throw invalidArgument(`${at}.server_url`, `Invalid '${at}.server_url': expected the https URL of an MCP server.`);
  const headers: Record<string, string> = {};
  const rawHeaders = tool['headers'];
  if (rawHeaders !== undefined && rawHeaders !== null) {
    if (!isObj(rawHeaders) || Object.values(rawHeaders).some((v) => typeof v !== 'string'))
      throw invalidArgument(`${at}.headers`, `Invalid '${at}.headers': expected an object of string values.`);
    for (const [name, value] of Object.entries(rawHeaders)) headers[name.toLowerCase()] = value as string;
  }
  const authorization = tool['authorization'];
  if (authorization !== undefined && authorization !== null) {
    if (typeof authorization !== 'string')
      throw invalidArgument(`${at}.authorization`, `Invalid '${at}.authorization': expected a string.`);
    headers['authorization'] = `Bearer ${authorization}`;
  }
  let allowed: Set<string> | undefined;
  const rawAllowed = tool['allowed_tools'];
  if (Array.isArray(rawAllowed)) allowed = strings(rawAllowed, `${at}.allowed_tools`);
  else if (isObj(rawAllowed)) {
    if (rawAllowed['read_only'] === true)
      throw new SvcError('unsupported_value', `Unsupported value: '${at}.allowed_tools.read_only' is not served here; name the tools.`, {
        param: `${at}.allowed_tools.read_only`,
      });
    if (rawAllowed['tool_names'] !== undefined) allowed = strings(rawAllowed['tool_names'], `${at}.allowed_tools.tool_names`);
  } else if (rawAllowed !== undefined && rawAllowed !== null)
    throw invalidArgument(`${at}.allowed_tools`, `Invalid '${at}.allowed_tools': expected an array of tool names or {"tool_names": [...]}.`);
  const approval = tool['require_approval'];
  const noRoundTrip = `svc has no approval round trip: it runs the server's tools without asking, so set require_approval to "never"`;
  let never: Set<string> | undefined;
  let always = new Set<string>();
  if (isObj(approval)) {
    const n = approval['never'];
    const a = approval['always'];
    never = isObj(n) && n['tool_names'] !== undefined ? strings(n['tool_names'], `${at}.require_approval.never.tool_names`) : new Set();
    if (isObj(a) && a['tool_names'] !== undefined) always = strings(a['tool_names'], `${at}.require_approval.always.tool_names`);
  } else if (approval !== 'never')
    throw new SvcError(
      'unsupported_value',
      `Unsupported value: '${at}.require_approval' is ${approval === undefined || approval === null ? 'absent (OpenAI then asks for approval)' : JSON.stringify(approval)}; ${noRoundTrip}.`,
      { param: `${at}.require_approval` },
    );
  return {
    index,
    label,
    url: parsed.toString(),
    headers,
    ...(allowed === undefined ? {} : { allowed }),
    ...(never === undefined ? {} : { never }),
    always,
  };
}

/** The `mcp` tools of a body, validated, in order. */
export function mcpSpecs(body: Obj): McpServerSpec[] {
  const raw = body['tools'];
  if (!Array.isArray(raw)) return [];
  const specs: McpServerSpec[] = [];
  raw.forEach((tool: unknown, i) => {
    if (isObj(tool) && tool['type'] === 'mcp') specs.push(mcpSpec(tool, i));
  });
  const labels = new Set<string>();
  for (const spec of specs) {
    if (labels.has(spec.label))
      throw invalidArgument(`tools[${spec.index}].server_label`, `Invalid 'tools[${spec.index}].server_label': '${spec.label}' is used by another mcp tool.`);
    labels.add(spec.label);
  }
  return specs;
}

/** The function name the upstream sees for a server's tool: `mcp__<label>__<tool>`, 64 at most. */
export function mcpFunctionName(label: string, tool: string): string {
  const name = `mcp__${label}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  if (TOOL_NAME_RE.test(name) && name === `mcp__${label}__${tool}`) return name;
  // A tool name the upstream cannot carry as is: cut, and told apart by a hash of the real name.
  const hash = createHash('sha256').update(tool).digest('hex').slice(0, 8);
  return `${name.slice(0, 55)}_${hash}`;
}

/** A fetch for the MCP SDK that goes through the guarded fetcher. */
function guardedMcpFetch(spec: McpServerSpec, options: McpOptions, signal: AbortSignal | undefined) {
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const method = (init?.method ?? 'GET').toUpperCase();
    // svc reads no server-initiated stream: the standalone SSE GET is answered "not offered",
    // which the SDK takes as such (and a session DELETE is not needed: sessions just lapse).
    if (method !== 'POST') return new Response(null, { status: 405 });
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => {
      if (name !== 'accept') headers[name] = value;
    });
    try {
      const res = await guardedFetch(String(url), {
        method: 'POST',
        // The protocol's own headers (content type, session, version) win over the client's.
        headers: { ...spec.headers, ...headers },
        ...(typeof init?.body === 'string' ? { body: init.body } : {}),
        accept: 'application/json, text/event-stream',
        allowHttp: options.insecure,
        allowPrivateAddresses: options.insecure,
        maxBytes: MCP_MAX_BYTES,
        timeoutMs: MCP_TIMEOUT_MS,
        padFailures: false,
        ...(options.resolve === undefined ? {} : { resolve: options.resolve }),
        ...(signal === undefined ? {} : { signal }),
      });
      return new Response(res.status === 204 || res.status === 202 ? null : new Uint8Array(res.body), {
        status: res.status,
        headers: res.headers,
      });
    } catch (error) {
      if (error instanceof GuardedFetchError && error.status !== undefined) return new Response(null, { status: error.status });
      throw error;
    }
  };
}

/*
 * The MCP SDK's client (with ajv, zod-to-json-schema and zod 3 behind it: some 130 modules, about
 * 3.5 MiB of heap) is required on first use: a svc whose clients never name a remote MCP server
 * never loads it (docs/performance.md, Memory).
 */
interface McpSdk {
  readonly Client: typeof McpClient.Client;
  readonly StreamableHTTPClientTransport: typeof McpStreamableHttp.StreamableHTTPClientTransport;
  readonly StreamableHTTPError: typeof McpStreamableHttp.StreamableHTTPError;
  readonly McpError: typeof McpTypes.McpError;
}
let sdk: McpSdk | undefined;
function mcpSdk(): McpSdk {
  /* eslint-disable @typescript-eslint/no-require-imports */
  if (sdk === undefined) {
    const http = require('@modelcontextprotocol/sdk/client/streamableHttp.js') as typeof McpStreamableHttp;
    sdk = {
      Client: (require('@modelcontextprotocol/sdk/client/index.js') as typeof McpClient).Client,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      StreamableHTTPError: http.StreamableHTTPError,
      McpError: (require('@modelcontextprotocol/sdk/types.js') as typeof McpTypes).McpError,
    };
  }
  /* eslint-enable @typescript-eslint/no-require-imports */
  return sdk;
}

async function withSession<T>(spec: McpServerSpec, options: McpOptions, signal: AbortSignal | undefined, use: (client: Client) => Promise<T>): Promise<T> {
  const { Client, StreamableHTTPClientTransport } = mcpSdk();
  const transport = new StreamableHTTPClientTransport(new URL(spec.url), { fetch: guardedMcpFetch(spec, options, signal) });
  const client = new Client({ name: 'svc', version: '1' });
  try {
    await client.connect(transport, { timeout: MCP_TIMEOUT_MS, ...(signal === undefined ? {} : { signal }) });
    return await use(client);
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** What went wrong reaching a server, in words a client may read (no address, no header). */
function failureOf(error: unknown): { http?: number; protocol?: number; message: string } {
  // A session was tried, so the SDK is loaded.
  const { StreamableHTTPError, McpError } = mcpSdk();
  if (error instanceof StreamableHTTPError && error.code !== undefined && error.code >= 400)
    return { http: error.code, message: `the server answered HTTP ${error.code}` };
  if (error instanceof McpError) return { protocol: error.code, message: `the server answered an MCP error (${error.code}): ${error.message.slice(0, 300)}` };
  // The guard's reason (an internal address, a redirect, the size cap, the deadline) stays in the log.
  return { message: 'the server could not be reached, or its answer was refused (svc connects only to public https addresses, follows no redirect, and caps size and time)' };
}

/** Lists every server's tools; any failure is the request's 424, before anything is held. */
export async function listMcpServers(specs: readonly McpServerSpec[], options: McpOptions, requestId?: string): Promise<McpListing[]> {
  return Promise.all(
    specs.map(async (spec) => {
      try {
        const tools = await withSession(spec, options, undefined, async (client) => {
          const found: McpTool[] = [];
          let cursor: string | undefined;
          for (let page = 0; page < MAX_LIST_PAGES; page++) {
            const listed = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: MCP_TIMEOUT_MS });
            for (const t of listed.tools)
              found.push({
                name: t.name,
                description: t.description ?? null,
                input_schema: t.inputSchema as Obj,
                annotations: isObj(t.annotations) ? (t.annotations as Obj) : null,
              });
            cursor = listed.nextCursor;
            if (cursor === undefined) break;
          }
          return found;
        });
        return { spec, tools: tools.filter((t) => spec.allowed === undefined || spec.allowed.has(t.name)) };
      } catch (error) {
        const failure = failureOf(error);
        options.logger.warn(
          { requestId, serverLabel: spec.label, reason: error instanceof GuardedFetchError ? error.reason : error instanceof Error ? error.message.slice(0, 300) : 'error' },
          'responses: an mcp server could not list its tools',
        );
        throw new SvcError(
          'mcp_server_error',
          `Error retrieving tool list from MCP server '${spec.label}': ${failure.message}. Nothing was run or charged.`,
          { param: `tools[${spec.index}].server_url` },
        );
      }
    }),
  );
}

/** Refuses a listing whose offered tools would need approval (`require_approval` object form). */
export function checkApproval(listing: McpListing): void {
  const { spec } = listing;
  const at = `tools[${spec.index}].require_approval`;
  for (const tool of listing.tools) {
    if (spec.always.has(tool.name) || (spec.never !== undefined && !spec.never.has(tool.name)))
      throw new SvcError(
        'unsupported_value',
        `Unsupported value: '${at}' asks for approval of tool '${tool.name}'; svc has no approval round trip: list every offered tool under require_approval.never.tool_names, or set require_approval to "never".`,
        { param: at },
      );
  }
}

/** The `mcp_list_tools` output item of a listing. */
export function mcpListToolsItem(id: string, listing: McpListing): Obj {
  return {
    type: 'mcp_list_tools',
    id,
    server_label: listing.spec.label,
    tools: listing.tools.map((t) => ({ ...t })),
    error: null,
  };
}

/** One finished remote call: its `mcp_call` item and what the model reads. */
export interface McpCallResult {
  readonly item: Obj;
  readonly text: string;
  readonly failed: boolean;
}

function textOf(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return (content as Obj[])
    .map((part) => (part['type'] === 'text' && typeof part['text'] === 'string' ? part['text'] : JSON.stringify(part)))
    .join('\n');
}

/** Runs one call the model made on its server; every failure is the item's `error`. */
export async function callMcpTool(
  listing: McpListing,
  tool: string,
  call: WireToolCall,
  itemId: string,
  options: McpOptions,
  signal: AbortSignal,
  requestId: string,
): Promise<McpCallResult> {
  const base = { type: 'mcp_call', id: itemId, server_label: listing.spec.label, name: tool, arguments: call.function.arguments, approval_request_id: null };
  let args: unknown;
  try {
    args = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
  } catch {
    args = undefined;
  }
  if (!isObj(args)) {
    const message = 'The arguments are not a JSON object.';
    return {
      item: { ...base, status: 'failed', output: null, error: { type: 'mcp_protocol_error', code: -32602, message } },
      text: `Error: ${message}`,
      failed: true,
    };
  }
  try {
    const result = await withSession(listing.spec, options, signal, (client) =>
      client.callTool({ name: tool, arguments: args }, undefined, { timeout: MCP_TIMEOUT_MS, signal }),
    );
    const text = textOf(result.content);
    if (result.isError === true)
      return {
        item: { ...base, status: 'failed', output: null, error: { type: 'mcp_tool_execution_error', content: result.content ?? [] } },
        text: `Error: ${text}`,
        failed: true,
      };
    return { item: { ...base, status: 'completed', output: text, error: null }, text, failed: false };
  } catch (error) {
    if (signal.aborted) throw new SvcError('cancelled', 'The client went away.');
    const failure = failureOf(error);
    options.logger.warn(
      { requestId, serverLabel: listing.spec.label, tool, reason: error instanceof GuardedFetchError ? error.reason : error instanceof Error ? error.message.slice(0, 300) : 'error' },
      'responses: an mcp tool call failed',
    );
    const mcpError =
      failure.protocol !== undefined
        ? { type: 'mcp_protocol_error', code: failure.protocol, message: failure.message }
        : { type: 'http_error', code: failure.http ?? 0, message: failure.message };
    return { item: { ...base, status: 'failed', output: null, error: mcpError }, text: `Error: ${failure.message}`, failed: true };
  }
}
