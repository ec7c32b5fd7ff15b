import type { JsonObject, WireTool } from '../providers/llm/types';

/*
 * Custom (freeform) tools over a chat upstream, for chat completions and the Responses API alike.
 * A custom tool takes one string; a chat upstream knows only functions, so it is offered a
 * function with one string parameter `input`, and its calls come back as custom tool calls with
 * that string as their input. A grammar `format` cannot be enforced on a chat upstream: it is
 * written into the function's description, so the model sees it (docs/responses.md).
 */

/** The parameters of the function a custom tool is offered as. */
export const CUSTOM_PARAMETERS: JsonObject = {
  type: 'object',
  properties: { input: { type: 'string', description: 'The raw input of the tool, as free-form text.' } },
  required: ['input'],
  additionalProperties: false,
};

/** A custom tool's grammar (`lark` or `regex` in OpenAI's API). */
export interface CustomGrammar {
  readonly syntax: string;
  readonly definition: string;
}

/** The function a chat upstream is offered for a custom tool (`name` as the upstream sees it). */
export function customToolFunction(name: string, description?: string, grammar?: CustomGrammar): WireTool {
  const rule =
    grammar === undefined ? undefined : `The input must match this ${grammar.syntax} grammar:\n${grammar.definition}`;
  const text = rule === undefined ? description : description === undefined ? rule : `${description}\n\n${rule}`;
  return {
    type: 'function',
    function: { name, ...(text !== undefined ? { description: text } : {}), parameters: CUSTOM_PARAMETERS },
  };
}

/** The function arguments a custom tool call of the history goes upstream with. */
export function customCallArguments(input: string): string {
  return JSON.stringify({ input });
}

/** The input of a custom tool call: the one string argument of the function the upstream called. */
export function customInputOf(args: string): string {
  try {
    const parsed: unknown = JSON.parse(args);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as JsonObject)['input'] === 'string')
      return (parsed as JsonObject)['input'] as string;
  } catch {
    // Not the JSON object asked for: the raw arguments are the model's input.
  }
  return args;
}
