import { randomHex } from '../../ids';
import type { JsonObject } from '../../providers/llm/types';

// What both sides of the Responses translation use: the echoed request fields (made by
// ./request.ts, echoed by ./response.ts) and the ids of a response and its output items.

type Obj = JsonObject;

/** The parts of a CreateResponse body the Response object echoes back. */
export interface ResponseEcho {
  readonly model: string;
  readonly instructions: string | null;
  readonly tools: Obj[];
  readonly toolChoice: string | Obj;
  readonly temperature: number | null;
  readonly topP: number | null;
  readonly parallelToolCalls: boolean;
  readonly maxOutputTokens: number | null;
  readonly text: Obj;
  readonly metadata: Record<string, string>;
  readonly store: boolean;
  readonly previousResponseId: string | null;
  readonly user: string | null;
  readonly reasoning: Obj | null;
  readonly topLogprobs: number | null;
  readonly promptCacheKey: string | null;
  readonly serviceTier: string | null;
  /** `max_tool_calls`: the most hosted tool calls (searches) the response may run; null: the operator's bound. */
  readonly maxToolCalls: number | null;
  /** `truncation` as the client sent it (absent in responses stored before it was kept: "disabled"). */
  readonly truncation?: 'auto' | 'disabled';
}

export function newResponseId(): string {
  return `resp_${randomHex(16)}`;
}

/** Ids of a response's output items and of calls the upstream left unnamed. */
export interface ItemIds {
  message(): string;
  call(): string;
  customCall(): string;
  reasoning(): string;
  webSearch(): string;
  /** The hosted mcp tool's `mcp_list_tools` and `mcp_call` items. */
  mcpList(): string;
  mcpCall(): string;
  /** The hosted image_generation tool's `image_generation_call` items. */
  imageCall(): string;
  /** A call id for a tool call whose upstream id is missing. */
  callId(): string;
}

// Output item ids embed their response's id, so an `item_reference` can be resolved with one
// primary-key read of the stored response.
export function itemIdsFor(responseId: string): ItemIds {
  const hex = responseId.slice('resp_'.length);
  let n = 0;
  return {
    message: () => `msg_${hex}_${n++}`,
    call: () => `fc_${hex}_${n++}`,
    customCall: () => `ctc_${hex}_${n++}`,
    reasoning: () => `rs_${hex}_${n++}`,
    webSearch: () => `ws_${hex}_${n++}`,
    mcpList: () => `mcpl_${hex}_${n++}`,
    mcpCall: () => `mcp_${hex}_${n++}`,
    imageCall: () => `ig_${hex}_${n++}`,
    callId: () => `call_${hex}_${n++}`,
  };
}

const ITEM_ID_RE = /^(?:msg|fc|ctc|rs)_([0-9a-f]{32})_\d+$/;

/** The response an output item id belongs to, or undefined for ids svc did not make. */
export function responseIdOfItem(itemId: string): string | undefined {
  const match = ITEM_ID_RE.exec(itemId);
  return match?.[1] === undefined ? undefined : `resp_${match[1]}`;
}
