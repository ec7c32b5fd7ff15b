import { invalidArgument } from '../../errors';
import type { JsonObject, WireTool } from '../../providers/llm/types';
import { checkToolChoice, checkTools, TOOL_NAME_RE } from '../prepare';

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
  /** `web_search`: the hosted tool, which svc runs itself with its own web_search provider. */
  readonly kind: 'function' | 'custom' | 'web_search';
  readonly name: string;
  readonly namespace?: string;
}

/** Upstream function name → the Responses tool it stands for. */
export type ToolMap = ReadonlyMap<string, UpstreamTool>;

/** The function name a Responses tool has upstream: namespaced tools carry their namespace. */
export function upstreamToolName(name: string, namespace?: string): string {
  return namespace === undefined ? name : `${namespace}__${name}`;
}

// A custom (freeform) tool takes one string; the upstream sees a function with that one parameter.
const CUSTOM_PARAMETERS: Obj = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input of the tool, as free-form text.' } },
  required: ['input'],
  additionalProperties: false,
};

function customDescription(tool: Obj): string | undefined {
  const description = typeof tool['description'] === 'string' ? tool['description'] : undefined;
  const format = tool['format'];
  if (!isObj(format) || format['type'] !== 'grammar' || typeof format['definition'] !== 'string') return description;
  const syntax = typeof format['syntax'] === 'string' ? format['syntax'] : 'grammar';
  const rule = `The input must match this ${syntax} grammar:\n${format['definition']}`;
  return description === undefined ? rule : `${description}\n\n${rule}`;
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

/** The request's tools: what goes upstream, what the Response echoes, and what was left out. */
export interface ToolsOut {
  wire: WireTool[];
  echo: Obj[];
  map: Map<string, UpstreamTool>;
  dropped: string[];
}

/** Validates and translates `tools` (400s name the offending field). */
export function tools(body: Obj): ToolsOut {
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
      const fnDescription = customDescription(tool);
      out.wire.push({
        type: 'function',
        function: {
          name: upstream,
          ...(fnDescription !== undefined ? { description: fnDescription } : {}),
          parameters: CUSTOM_PARAMETERS,
        },
      });
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
    if (type !== 'namespace') {
      out.dropped.push(type);
      return;
    }
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
  // A built-in tool the chat upstream does not have: let the model choose among the rest.
  return { chat: undefined, echo: 'auto' };
}
