/*
 * Claude Code's deferred tools (tool search): tools marked `defer_loading: true` are known but not
 * offered until loaded; the client's own ToolSearch tool finds them (by name and description, on
 * the client) and answers with `tool_reference` blocks in its tool_result, which load them. Over a
 * chat upstream svc does what Anthropic's API does: a deferred tool is offered to the model from
 * the turn whose history references it, and each `tool_reference` reaches the model as a line
 * saying that tool is now available (with its description), since chat upstreams have no such
 * block. Passed through to an Anthropic upstream, the body goes as sent.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface DeferredTools {
  /** The tools to translate: the non-deferred ones and the deferred ones the history loaded. */
  readonly tools: unknown[];
  /** The messages with each `tool_reference` block replaced by a text block. */
  readonly messages: unknown[];
}

/**
 * Resolves deferred tools and tool references. A reference to a tool the request does not have is
 * refused (`refuse(param, message)`), as Anthropic refuses it.
 */
export function resolveDeferredTools(
  rawTools: readonly unknown[],
  rawMessages: readonly unknown[],
  refuse: (param: string, message: string) => never,
): DeferredTools {
  const byName = new Map<string, Obj>();
  for (const t of rawTools) if (isObj(t) && typeof t['name'] === 'string') byName.set(t['name'], t);
  const loaded = new Set<string>();
  const messages = rawMessages.map((message, i) => {
    if (!isObj(message) || message['role'] !== 'user' || !Array.isArray(message['content'])) return message;
    const content = (message['content'] as unknown[]).map((block, j) => {
      if (!isObj(block) || block['type'] !== 'tool_result' || !Array.isArray(block['content'])) return block;
      const inner = (block['content'] as unknown[]).map((part, k) => {
        if (!isObj(part) || part['type'] !== 'tool_reference') return part;
        const name = part['tool_name'];
        const tool = typeof name === 'string' ? byName.get(name) : undefined;
        if (typeof name !== 'string' || tool === undefined)
          refuse(
            `messages.${i}.content.${j}.content.${k}.tool_name`,
            `messages.${i}.content.${j}.content.${k}.tool_name: tool '${String(name)}' is not among the request's tools.`,
          );
        loaded.add(name);
        const description = typeof tool['description'] === 'string' ? `: ${tool['description']}` : '';
        return { type: 'text', text: `Tool '${name}' is now available${description}` };
      });
      return { ...block, content: inner };
    });
    return { ...message, content };
  });
  const tools = rawTools
    .filter((t) => !(isObj(t) && t['defer_loading'] === true && !loaded.has(String(t['name']))))
    .map((t) => {
      if (!isObj(t) || t['defer_loading'] === undefined) return t;
      const { defer_loading: _deferred, ...rest } = t;
      return rest;
    });
  return { tools, messages };
}
