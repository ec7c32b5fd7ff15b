import { invalidArgument, SvcError } from '../../errors';
import type { JsonObject, WireTool } from '../../providers/llm/types';
import { checkToolChoice, checkTools, TOOL_NAME_RE } from '../prepare';
import { customToolFunction, type CustomGrammar } from '../custom-tools';
import { checkToolType, UNSERVED_HOSTED_TOOLS } from './fields';
import { checkApproval, mcpFunctionName, type McpListing } from './hosted-mcp';
import { HOSTED_IMAGE_GENERATION, IMAGE_GENERATION_FUNCTION } from './hosted-image';

/*
 * The tools of a CreateResponse body as chat-completions functions: `function` tools as they
 * are, each tool of a `namespace` under `<namespace>__<name>`, `custom` tools as a function of
 * one string, and the hosted `web_search` as a `web_search(query)` function svc runs itself.
 * The ToolMap turns the upstream's calls back into the items the client expects.
 */

type Obj = JsonObject;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What a function name the upstream sees stands for in the Responses API. */
export interface UpstreamTool {
  /**
   * `web_search`: the hosted tool, which svc runs itself with its own web_search provider;
   * `mcp`: a tool of a remote MCP server (`name` as the server knows it), which svc calls;
   * `image_generation`: the hosted tool, which svc runs on `responses.image_generation_model`.
   */
  readonly kind: 'function' | 'custom' | 'web_search' | 'mcp' | 'image_generation';
  readonly name: string;
  readonly namespace?: string;
  /** `mcp`: the server's listing. */
  readonly mcp?: McpListing;
  /** `image_generation`: the tool as the request gave it, and where (`tools[i]`). */
  readonly image?: { readonly options: JsonObject; readonly at: string };
}

/** Whether svc runs the tool itself between model turns (the hosted loop). */
export const isHosted = (tool: UpstreamTool | undefined): boolean =>
  tool?.kind === 'web_search' || tool?.kind === 'mcp' || tool?.kind === 'image_generation';

/** What svc serves beyond the tools every request may have. */
export interface HostedTools {
  /** `responses.image_generation_model` is set: the hosted image_generation tool is served. */
  readonly imageGeneration?: boolean;
}

/** Upstream function name → the Responses tool it stands for. */
export type ToolMap = ReadonlyMap<string, UpstreamTool>;

/** The function name a Responses tool has upstream: namespaced tools carry their namespace. */
export function upstreamToolName(name: string, namespace?: string): string {
  return namespace === undefined ? name : `${namespace}__${name}`;
}

/** The grammar of a Responses custom tool's `format` (`{"type": "grammar", "syntax", "definition"}`). */
function grammarOf(format: unknown): CustomGrammar | undefined {
  if (!isObj(format) || format['type'] !== 'grammar' || typeof format['definition'] !== 'string') return undefined;
  return { syntax: typeof format['syntax'] === 'string' ? format['syntax'] : 'grammar', definition: format['definition'] };
}

const WEB_SEARCH_TYPES = new Set([
  'web_search',
  'web_search_preview',
  'web_search_2025_08_26',
  'web_search_preview_2025_03_11',
]);

/** The upstream function that stands for the hosted web_search tool. */
export const HOSTED_WEB_SEARCH = 'web_search';

const WEB_SEARCH_FUNCTION: WireTool = {
  type: 'function',
  function: {
    name: HOSTED_WEB_SEARCH,
    description:
      'Search the web for current information. Returns titles, URLs and summaries; cite the URLs you use in your answer.',
    parameters: {
      type: 'object',
      properties: { query: { type: 'string', description: 'What to search for.' } },
      required: ['query'],
      additionalProperties: false,
    },
  },
};

/** The request's tools: what goes upstream and what the Response echoes (nothing is left out). */
export interface ToolsOut {
  wire: WireTool[];
  echo: Obj[];
  map: Map<string, UpstreamTool>;
  /** Always empty: a tool svc cannot offer is refused (fields.ts). Kept for the service's log line. */
  dropped: string[];
}

/**
 * Validates and translates `tools` (400s name the offending field); `mcp` tools are offered as
 * their servers listed them (`listings`, by index in `tools`, hosted-mcp.ts).
 */
export function tools(
  body: Obj,
  listings: ReadonlyMap<number, McpListing> = new Map(),
  hosted: HostedTools = {},
): ToolsOut {
  const raw = body['tools'];
  const out: ToolsOut = { wire: [], echo: [], map: new Map(), dropped: [] };
  if (raw === undefined || raw === null) return out;
  if (!Array.isArray(raw)) throw invalidArgument('tools', `Invalid 'tools': expected an array.`);
  const params: string[] = [];

  // One function or custom tool, top-level (`namespace` undefined) or inside a namespace.
  const add = (tool: Obj, at: string, namespace: string | undefined): Obj => {
    const name = tool['name'];
    if (typeof name !== 'string' || name === '')
      throw invalidArgument(`${at}.name`, `Invalid '${at}.name': expected a non-empty string.`);
    const upstream = upstreamToolName(name, namespace);
    if (namespace !== undefined && !TOOL_NAME_RE.test(upstream)) {
      throw invalidArgument(
        `${at}.name`,
        `Invalid '${at}.name': the upstream model sees this tool as '${upstream}', which must be 1-64 characters of a-z, A-Z, 0-9, underscores and dashes. Use a shorter namespace or tool name.`,
      );
    }
    const known = out.map.get(upstream);
    if (known !== undefined) {
      throw invalidArgument(
        `${at}.name`,
        `Invalid '${at}.name': the tool name '${upstream}' is already used by ${known.namespace === undefined ? 'another tool' : `a tool in namespace '${known.namespace}'`}.`,
      );
    }
    const description = typeof tool['description'] === 'string' ? tool['description'] : undefined;
    if (tool['type'] === 'custom') {
      const format = tool['format'];
      if (format !== undefined && format !== null && !isObj(format))
        throw invalidArgument(`${at}.format`, `Invalid '${at}.format': expected an object.`);
      out.wire.push(customToolFunction(upstream, description, grammarOf(format)));
      params.push(at);
      out.map.set(upstream, { kind: 'custom', name, ...(namespace !== undefined ? { namespace } : {}) });
      return {
        type: 'custom',
        name,
        ...(description !== undefined ? { description } : {}),
        ...(isObj(format) ? { format } : {}),
      };
    }
    const parameters = tool['parameters'];
    if (parameters !== undefined && parameters !== null && !isObj(parameters))
      throw invalidArgument(`${at}.parameters`, `Invalid '${at}.parameters': expected a JSON Schema object.`);
    const strict = typeof tool['strict'] === 'boolean' ? tool['strict'] : undefined;
    out.wire.push({
      type: 'function',
      function: {
        name: upstream,
        ...(description !== undefined ? { description } : {}),
        ...(isObj(parameters) ? { parameters } : {}),
        ...(strict !== undefined ? { strict } : {}),
      },
    });
    params.push(at);
    out.map.set(upstream, { kind: 'function', name, ...(namespace !== undefined ? { namespace } : {}) });
    return {
      type: 'function',
      name,
      description: description ?? null,
      parameters: isObj(parameters) ? parameters : null,
      strict: strict ?? false,
    };
  };

  raw.forEach((tool, i) => {
    const at = `tools[${i}]`;
    if (!isObj(tool) || typeof tool['type'] !== 'string')
      throw invalidArgument(at, `Invalid '${at}': expected a tool object with a type.`);
    const type = tool['type'];
    if (type === 'function' || type === 'custom') {
      out.echo.push(add(tool, at, undefined));
      return;
    }
    if (WEB_SEARCH_TYPES.has(type)) {
      const known = out.map.get(HOSTED_WEB_SEARCH);
      if (known !== undefined) {
        throw invalidArgument(
          at,
          `Invalid '${at}': ${known.kind === 'web_search' ? 'only one web_search tool is allowed' : `the hosted web_search tool needs the function name '${HOSTED_WEB_SEARCH}', which another tool uses`}.`,
        );
      }
      out.wire.push(WEB_SEARCH_FUNCTION);
      params.push(at);
      out.map.set(HOSTED_WEB_SEARCH, { kind: 'web_search', name: HOSTED_WEB_SEARCH });
      out.echo.push({ ...tool });
      return;
    }
    if (type === 'image_generation' && hosted.imageGeneration === true) {
      const known = out.map.get(HOSTED_IMAGE_GENERATION);
      if (known !== undefined)
        throw invalidArgument(
          at,
          `Invalid '${at}': ${known.kind === 'image_generation' ? 'only one image_generation tool is allowed' : `the hosted image_generation tool needs the function name '${HOSTED_IMAGE_GENERATION}', which another tool uses`}.`,
        );
      // svc makes new images from the model's prompt; editing an image it was given is not served.
      const action = tool['action'];
      if (action !== undefined && action !== null && action !== 'auto' && action !== 'generate')
        throw new SvcError(
          'unsupported_value',
          `Unsupported value: '${at}.action' '${String(action)}' is not served here; svc's image_generation tool generates new images ('generate' or 'auto').`,
          { param: `${at}.action` },
        );
      for (const field of ['input_image_mask', 'input_fidelity'])
        if (tool[field] !== undefined && tool[field] !== null)
          throw new SvcError(
            'unsupported_parameter',
            `Unsupported parameter: '${at}.${field}' is not served here; svc's image_generation tool generates new images.`,
            { param: `${at}.${field}` },
          );
      out.wire.push(IMAGE_GENERATION_FUNCTION);
      params.push(at);
      out.map.set(HOSTED_IMAGE_GENERATION, {
        kind: 'image_generation',
        name: HOSTED_IMAGE_GENERATION,
        image: { options: { ...tool }, at },
      });
      out.echo.push({ ...tool });
      return;
    }
    if (type === 'mcp') {
      const listing = listings.get(i);
      if (listing === undefined) throw new SvcError('internal', `the mcp tool ${at} was not listed`);
      checkApproval(listing);
      for (const t of listing.tools) {
        const upstream = mcpFunctionName(listing.spec.label, t.name);
        if (out.map.has(upstream))
          throw invalidArgument(at, `Invalid '${at}': the server's tool '${t.name}' is offered as '${upstream}', which another tool uses.`);
        out.wire.push({
          type: 'function',
          function: {
            name: upstream,
            ...(t.description === null ? {} : { description: t.description }),
            parameters: t.input_schema,
          },
        });
        params.push(at);
        out.map.set(upstream, { kind: 'mcp', name: t.name, mcp: listing });
      }
      // The client's headers and authorization went to the server only: never echoed or stored.
      const { headers: _headers, authorization: _authorization, ...echoed } = tool;
      out.echo.push(echoed);
      return;
    }
    checkToolType(type, at);
    const namespace = tool['name'];
    if (typeof namespace !== 'string' || namespace === '')
      throw invalidArgument(`${at}.name`, `Invalid '${at}.name': expected a non-empty string.`);
    const inner = tool['tools'];
    if (!Array.isArray(inner) || inner.length === 0)
      throw invalidArgument(`${at}.tools`, `Invalid '${at}.tools': a namespace needs at least one tool.`);
    const echoed = inner.map((member, j) => {
      const memberAt = `${at}.tools[${j}]`;
      if (!isObj(member) || (member['type'] !== 'function' && member['type'] !== 'custom')) {
        throw invalidArgument(memberAt, `Invalid '${memberAt}': a namespace holds only 'function' and 'custom' tools.`);
      }
      return add(member, memberAt, namespace);
    });
    out.echo.push({
      type: 'namespace',
      name: namespace,
      description: typeof tool['description'] === 'string' ? tool['description'] : '',
      tools: echoed,
    });
  });
  checkTools(out.wire, (j, field) => `${params[j] ?? `tools[${j}]`}.${field}`);
  return out;
}

/** The upstream functions of the mcp server labelled `label`. */
function mcpFunctions(t: ToolsOut, label: unknown): string[] {
  return [...t.map].filter(([, tool]) => tool.kind === 'mcp' && tool.mcp?.spec.label === label).map(([name]) => name);
}

/** Validates and translates `tool_choice` against the request's tools. */
export function toolChoice(body: Obj, t: ToolsOut): { chat: string | Obj | undefined; echo: string | Obj } {
  const raw = body['tool_choice'];
  if (raw === undefined || raw === null) return { chat: undefined, echo: 'auto' };
  if (typeof raw === 'string') return { chat: checkToolChoice(raw, t.wire, 'tool_choice'), echo: raw };
  if (!isObj(raw)) throw invalidArgument('tool_choice', `Invalid 'tool_choice': expected a string or an object.`);
  const type = raw['type'];
  if (type === 'function' || type === 'custom') {
    const name = raw['name'];
    const namespace = typeof raw['namespace'] === 'string' ? raw['namespace'] : undefined;
    if (typeof name !== 'string')
      throw invalidArgument('tool_choice.name', `Invalid 'tool_choice.name': expected a string.`);
    // A namespaced tool is named by its namespace and name, or by the name the upstream sees.
    const upstream = upstreamToolName(name, namespace);
    const target = t.map.get(upstream);
    if (target === undefined || target.kind !== type) {
      throw invalidArgument(
        'tool_choice',
        `Invalid 'tool_choice': ${type} tool '${namespace === undefined ? name : `${namespace}.${name}`}' is not among the tools.`,
      );
    }
    const chat = checkToolChoice({ type: 'function', function: { name: upstream } }, t.wire, 'tool_choice');
    return { chat, echo: { type, name, ...(namespace !== undefined ? { namespace } : {}) } };
  }
  if (type === 'allowed_tools') return allowedTools(raw, t);
  if (typeof type === 'string' && WEB_SEARCH_TYPES.has(type)) {
    // The hosted search is the `web_search` function upstream: forcing it forces that function.
    if (t.map.get(HOSTED_WEB_SEARCH)?.kind !== 'web_search')
      throw invalidArgument('tool_choice', `Invalid 'tool_choice': tool '${type}' is not among the tools.`);
    const chat = checkToolChoice({ type: 'function', function: { name: HOSTED_WEB_SEARCH } }, t.wire, 'tool_choice');
    return { chat, echo: { type } };
  }
  if (type === 'image_generation' && t.map.get(HOSTED_IMAGE_GENERATION)?.kind === 'image_generation') {
    const chat = checkToolChoice(
      { type: 'function', function: { name: HOSTED_IMAGE_GENERATION } },
      t.wire,
      'tool_choice',
    );
    return { chat, echo: { type } };
  }
  if (type === 'mcp') {
    // `{"type": "mcp", "server_label", "name"?}`: that tool of that server is forced; without a
    // name, the model must call one of the server's tools (it is offered only those).
    const label = raw['server_label'];
    const name = raw['name'];
    const server = mcpFunctions(t, label);
    if (server.length === 0)
      throw invalidArgument('tool_choice', `Invalid 'tool_choice': no mcp tool with server_label '${String(label)}' offers tools here.`);
    if (typeof name === 'string') {
      const upstream = server.find((f) => t.map.get(f)?.name === name);
      if (upstream === undefined)
        throw invalidArgument('tool_choice.name', `Invalid 'tool_choice.name': server '${String(label)}' offers no tool '${name}'.`);
      const chat = checkToolChoice({ type: 'function', function: { name: upstream } }, t.wire, 'tool_choice');
      return { chat, echo: { type, server_label: label, name } };
    }
    t.wire = t.wire.filter((tool) => server.includes(tool.function.name));
    return { chat: checkToolChoice('required', t.wire, 'tool_choice'), echo: { type, server_label: label, name: null } };
  }
  if (typeof type === 'string' && UNSERVED_HOSTED_TOOLS.has(type)) {
    throw new SvcError('unsupported_value', `Unsupported value: the hosted tool '${type}' is not served here.`, {
      param: 'tool_choice.type',
    });
  }
  throw invalidArgument(
    'tool_choice.type',
    `Invalid value: '${String(type)}'. Supported values are: 'function', 'custom', 'allowed_tools', 'web_search' and 'mcp'.`,
  );
}

/**
 * `{"type": "allowed_tools", "mode", "tools": [...]}`: the model may call only these. It goes
 * upstream as chat completions' `allowed_tools` choice over every tool (an upstream without it is
 * offered only these, with `mode` as its tool_choice); the response echoes every tool.
 */
function allowedTools(raw: Obj, t: ToolsOut): { chat: string | Obj | undefined; echo: string | Obj } {
  const mode = raw['mode'];
  if (mode !== 'auto' && mode !== 'required')
    throw invalidArgument('tool_choice.mode', `Invalid 'tool_choice.mode': expected 'auto' or 'required'.`);
  const list = raw['tools'];
  if (!Array.isArray(list) || list.length === 0)
    throw invalidArgument('tool_choice.tools', `Invalid 'tool_choice.tools': expected a non-empty array of tools.`);
  const allowed = new Set<string>();
  list.forEach((entry: unknown, i) => {
    const at = `tool_choice.tools[${i}]`;
    if (!isObj(entry) || typeof entry['type'] !== 'string')
      throw invalidArgument(at, `Invalid '${at}': expected a tool object with a type.`);
    const type = entry['type'];
    let upstream: string;
    if (WEB_SEARCH_TYPES.has(type)) upstream = HOSTED_WEB_SEARCH;
    else if (type === 'image_generation' && t.map.get(HOSTED_IMAGE_GENERATION)?.kind === 'image_generation')
      upstream = HOSTED_IMAGE_GENERATION;
    else if (type === 'function' || type === 'custom') {
      if (typeof entry['name'] !== 'string')
        throw invalidArgument(`${at}.name`, `Invalid '${at}.name': expected a string.`);
      upstream = upstreamToolName(
        entry['name'],
        typeof entry['namespace'] === 'string' ? entry['namespace'] : undefined,
      );
    } else if (type === 'mcp') {
      // A server's tools: all of them, or the one named.
      const server = mcpFunctions(t, entry['server_label']).filter(
        (f) => typeof entry['name'] !== 'string' || t.map.get(f)?.name === entry['name'],
      );
      if (server.length === 0)
        throw invalidArgument(at, `Invalid '${at}': no such mcp tool among the tools.`);
      for (const f of server) allowed.add(f);
      return;
    } else if (type === 'namespace' && typeof entry['name'] === 'string') {
      const namespace = entry['name'];
      for (const [name, tool] of t.map) if (tool.namespace === namespace) allowed.add(name);
      return;
    } else {
      checkToolType(type, at);
      throw invalidArgument(`${at}.type`, `Invalid '${at}.type': '${type}' cannot be named here.`);
    }
    if (!t.map.has(upstream)) throw invalidArgument(at, `Invalid '${at}': tool '${upstream}' is not among the tools.`);
    allowed.add(upstream);
  });
  // Every tool stays offered (SPEC §13: the prompt, and its cache, the same from turn to turn);
  // a provider whose upstream has no allowed_tools narrows the list itself (`narrowedToAllowed`).
  checkToolChoice(mode, t.wire.filter((tool) => allowed.has(tool.function.name)), 'tool_choice');
  const names = t.wire.filter((tool) => allowed.has(tool.function.name)).map((tool) => tool.function.name);
  return {
    chat: {
      type: 'allowed_tools',
      allowed_tools: { mode, tools: names.map((name) => ({ type: 'function', function: { name } })) },
    },
    echo: { ...raw },
  };
}
