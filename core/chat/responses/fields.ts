import { invalidArgument, SvcError } from '../../errors';
import type { JsonObject } from '../../providers/llm/types';

/*
 * What the Responses wire may carry and what svc does with each piece (SPEC §7d, "nothing
 * dropped"): every top-level field, input item type, content part type and tool type of a
 * CreateResponse is a line in one of the tables below, and anything that is not is refused with
 * OpenAI's own 400 naming it. `request.ts` and `tools.ts` translate by these tables; a new field
 * is a line here before it is code anywhere. docs/responses.md lists them for users.
 *
 * A fate is one of:
 * - `translated`: carried to the upstream (chat completions, or the Responses upstream as is);
 * - `served`: svc itself does what it asks (stores, chains, runs the hosted tool, compacts);
 * - `hint`: tunes only how the call is served or traced (no answer depends on it), accepted;
 * - `refused`: a 400 naming it, since svc cannot do what it asks (the reason is the message).
 */

export type Fate = 'translated' | 'served' | 'hint' | 'refused';

export interface WireEntry {
  readonly fate: Fate;
  /** Why a refused entry is refused (the end of the 400's message). */
  readonly why?: string;
  /** A refusal applies only to these values (e.g. `background: true`); other values are accepted. */
  readonly refusedWhen?: (value: unknown) => boolean;
}

const refusedNonNull = (v: unknown): boolean => v !== undefined && v !== null;

/** Top-level CreateResponse fields (OpenAI's CreateResponse, plus what Codex sends). */
export const RESPONSE_FIELDS: Readonly<Record<string, WireEntry>> = {
  model: { fate: 'served' },
  input: { fate: 'translated' },
  instructions: { fate: 'translated' },
  tools: { fate: 'translated' },
  tool_choice: { fate: 'translated' },
  temperature: { fate: 'translated' },
  top_p: { fate: 'translated' },
  max_output_tokens: { fate: 'translated' },
  parallel_tool_calls: { fate: 'translated' },
  text: { fate: 'translated' },
  reasoning: { fate: 'translated' },
  top_logprobs: { fate: 'translated' },
  include: { fate: 'translated' },
  user: { fate: 'translated' },
  safety_identifier: { fate: 'translated' },
  prompt_cache_key: { fate: 'translated' },
  prompt_cache_retention: { fate: 'translated' },
  prompt_cache_options: { fate: 'translated' },
  service_tier: { fate: 'translated' },
  moderation: { fate: 'translated' },
  metadata: { fate: 'served' },
  store: { fate: 'served' },
  previous_response_id: { fate: 'served' },
  stream: { fate: 'served' },
  // svc bounds the hosted tool loop by it (SPEC §6).
  max_tool_calls: { fate: 'served' },
  // "auto" lets the server drop old items past the context window; svc's inputs fit or are refused
  // (context_length_exceeded) before anything is held, so there is never anything to drop.
  truncation: { fate: 'served' },
  stream_options: { fate: 'hint' },
  // Codex's installation, window, thread and turn ids: correlation only.
  client_metadata: { fate: 'hint' },
  background: {
    fate: 'refused',
    refusedWhen: (v) => v === true,
    why: 'responses are answered while the request waits. Leave it out, or stream the response.',
  },
  prompt: {
    fate: 'refused',
    refusedWhen: refusedNonNull,
    why: 'stored prompt templates live at OpenAI. Send the input itself.',
  },
  conversation: {
    fate: 'refused',
    refusedWhen: refusedNonNull,
    why: "conversations live at OpenAI. Chain responses with 'previous_response_id'.",
  },
  context_management: {
    fate: 'refused',
    refusedWhen: refusedNonNull,
    why: 'compaction is not automatic here. End the input with a {"type": "compaction_trigger"} item, or call POST /responses/compact.',
  },
};

/** Input item types. */
export const INPUT_ITEMS: Readonly<Record<string, WireEntry>> = {
  message: { fate: 'translated' },
  function_call: { fate: 'translated' },
  function_call_output: { fate: 'translated' },
  custom_tool_call: { fate: 'translated' },
  custom_tool_call_output: { fate: 'translated' },
  item_reference: { fate: 'served' },
  // The model's earlier reasoning: a chat upstream takes none back (its answer already carries what
  // came of it); a Responses upstream gets it as sent.
  reasoning: { fate: 'served' },
  // svc's own record of a search it ran: the answer after it already carries what was found.
  web_search_call: { fate: 'served' },
  // svc's own record of the hosted mcp tool (hosted-mcp.ts): kept, never given to a chat upstream,
  // like web_search_call (the answer after them carries what came of them).
  mcp_list_tools: { fate: 'served' },
  mcp_call: { fate: 'served' },
  // svc's own record of an image the hosted image_generation tool made (hosted-image.ts): kept in
  // the conversation, never given to a chat upstream (the answer after it says what was made).
  image_generation_call: { fate: 'served' },
  // Remote compaction (compaction.ts): a sealed summary svc made, opened and expanded in place;
  // the trigger, last, asks for one.
  compaction: { fate: 'served' },
  compaction_trigger: { fate: 'served' },
};

/** Content part types of a message's `content`. */
export const CONTENT_PARTS: Readonly<Record<string, WireEntry>> = {
  input_text: { fate: 'translated' },
  output_text: { fate: 'translated' },
  text: { fate: 'translated' },
  refusal: { fate: 'translated' },
  // By URL or data URL; a `file_id` names a file at OpenAI (refused in request.ts).
  input_image: { fate: 'translated' },
  // Inline `file_data` goes upstream as a chat `file` part; a `file_id` or `file_url` is refused.
  input_file: { fate: 'translated' },
};

/** Tool types (hosted tools svc does not run are refused). */
export const TOOL_TYPES: Readonly<Record<string, WireEntry>> = {
  function: { fate: 'translated' },
  custom: { fate: 'translated' },
  namespace: { fate: 'translated' },
  web_search: { fate: 'served' },
  web_search_preview: { fate: 'served' },
  web_search_2025_08_26: { fate: 'served' },
  web_search_preview_2025_03_11: { fate: 'served' },
  // A remote MCP server's tools, listed and run by svc as an MCP client (hosted-mcp.ts).
  mcp: { fate: 'served' },
  // (`image_generation` is served when `responses.image_generation_model` is set: tools.ts takes
  // it before this table is asked; otherwise it is refused among UNSERVED_HOSTED_TOOLS.)
};

/** The hosted tools OpenAI runs that svc does not: refused by name. */
export const UNSERVED_HOSTED_TOOLS: ReadonlySet<string> = new Set([
  'file_search',
  'code_interpreter',
  'image_generation',
  'computer_use_preview',
  'computer_use',
  'computer',
  'local_shell',
  'shell',
  'apply_patch',
  'tool_search',
]);

const isObj = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Refuses what the tables do not carry: unknown top-level fields (OpenAI's `unknown_parameter`)
 * and refused ones in a value that asks for them. Runs before anything is held.
 */
export function checkResponseFields(body: JsonObject): void {
  for (const [name, value] of Object.entries(body)) {
    if (value === undefined) continue;
    const entry = RESPONSE_FIELDS[name];
    if (entry === undefined) throw new SvcError('unknown_parameter', `Unknown parameter: '${name}'.`, { param: name });
    if (entry.fate === 'refused' && (entry.refusedWhen?.(value) ?? true)) {
      throw new SvcError(
        'unsupported_parameter',
        `Unsupported parameter: '${name}' is not supported here: ${entry.why ?? ''}`,
        {
          param: name,
        },
      );
    }
  }
}

/** Refuses an input item type svc does not carry, naming `input[i].type`. */
export function checkInputItemType(type: string, at: string): void {
  const entry = INPUT_ITEMS[type];
  if (entry?.fate === 'refused')
    throw new SvcError(
      'unsupported_value',
      `Unsupported value: the input item type '${type}' is not supported here: ${entry.why ?? ''}`,
      {
        param: `${at}.type`,
      },
    );
  if (entry !== undefined) return;
  throw invalidArgument(
    `${at}.type`,
    `Invalid value: '${type}'. The input item type '${type}' is not supported here: svc cannot give it to the model. Supported types: ${Object.keys(
      INPUT_ITEMS,
    )
      .map((t) => `'${t}'`)
      .join(', ')}.`,
  );
}

/** Refuses a content part type svc does not carry, naming `…content[j].type`. */
export function checkContentPartType(type: string, at: string): void {
  if (CONTENT_PARTS[type] !== undefined) return;
  throw invalidArgument(
    `${at}.type`,
    `Invalid value: '${type}'. The content part type '${type}' is not supported here. Supported types: ${Object.keys(
      CONTENT_PARTS,
    )
      .map((t) => `'${t}'`)
      .join(', ')}.`,
  );
}

/** Refuses a tool type svc neither carries nor runs, naming `tools[i].type`. */
export function checkToolType(type: string, at: string): void {
  if (TOOL_TYPES[type] !== undefined) return;
  if (UNSERVED_HOSTED_TOOLS.has(type)) {
    throw new SvcError(
      'unsupported_value',
      `Unsupported value: the hosted tool '${type}' is not served here${type === 'image_generation' ? ' (this server names no image model for it)' : ''}. Remove it from 'tools' (svc serves 'function', 'custom', 'namespace', 'web_search' and 'mcp' tools).`,
      { param: `${at}.type` },
    );
  }
  throw invalidArgument(
    `${at}.type`,
    `Invalid value: '${type}'. Supported tool types here: ${Object.keys(TOOL_TYPES)
      .map((t) => `'${t}'`)
      .join(', ')}.`,
  );
}

/** Whether a value is a JSON object (shared by the Responses translators). */
export { isObj as isJsonObject };
