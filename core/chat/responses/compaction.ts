import type { Principal } from '../../auth/types';
import { requireModel } from '../../auth/scope';
import type { BillingResult } from '../../billing/types';
import type { SvcConfig } from '../../config/types';
import { invalidArgument, SvcError } from '../../errors';
import { findChatModel } from '../../models/catalog';
import type { ChatProvider, JsonObject } from '../../providers/llm/types';
import { randomHex } from '../../ids';
import { prepareChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import type { ResponseEventOut } from './events';
import { modelOf, translateRequest } from './request';
import { newResponseId, responseObject, responsesUsage } from './response';
import type { CompactionSeal } from './seal';
import type { ResponseStore } from './store';

/*
 * Remote compaction (SPEC §7d), what Codex does when its provider is named "OpenAI": an input whose
 * last item is `{"type": "compaction_trigger"}` (and POST /responses/compact, which the adapter
 * turns into one) is answered with exactly one `compaction` output item. The summary is made by
 * the request's own model through the runner (held, settled and billed as that model's tokens,
 * like any turn), and sealed (seal.ts) into `encrypted_content`. A `compaction` item in a later
 * input is opened and replaced by the items it stands for (`expand`), before anything else reads
 * the input; one that does not open for this account is a 400.
 */

type Obj = JsonObject;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const SUMMARY_PROMPT = `You are performing a CONTEXT CHECKPOINT COMPACTION. Write a handoff summary of the conversation above for another model that will continue the work without seeing it. Include: the user's goal and requests, in their words where it matters; decisions made and why; the current state (what was done, files or data touched, results of tool calls that still matter); constraints and preferences; and the clear next steps. Be complete but concise. Answer with the summary only.`;

const SUMMARY_HEADER =
  'This conversation was compacted. Here is a summary of everything before this point, written for you to continue the work:\n\n';

// A summary needs no more; the hold is sized by it.
const SUMMARY_MAX_TOKENS = 8192;

export interface Compaction {
  /** The body with each `compaction` input item opened and expanded in place (unchanged when there is none). */
  expand(body: Obj, principal: Principal): Promise<Obj>;
  /** Whether the input ends in a `compaction_trigger`; one anywhere else is a 400. */
  triggered(body: Obj): boolean;
  create(body: Obj, principal: Principal, run: RunContext): Promise<{ response: Obj; billing: BillingResult }>;
  stream(body: Obj, principal: Principal, run: RunContext): AsyncGenerator<ResponseEventOut>;
}

export function createCompaction(deps: {
  config: Pick<SvcConfig, 'models'>;
  providers: ReadonlyMap<string, ChatProvider>;
  runner: ChatRunner;
  responses: ResponseStore;
  seal: CompactionSeal;
  now: () => number;
}): Compaction {
  const seconds = (): number => Math.floor(deps.now() / 1000);

  /** Makes and seals the summary; the Response, and what a later `previous_response_id` continues from. */
  async function compact(
    body: Obj,
    principal: Principal,
    run: RunContext,
  ): Promise<{ response: Obj; billing: BillingResult; conversation: Obj[] }> {
    const model = findChatModel(deps.config, modelOf(body));
    requireModel(principal, model.id, modelOf(body));
    const provider = deps.providers.get(model.id);
    if (provider === undefined) throw new SvcError('internal', `no provider for model ${model.id}`);
    const input = body['input'] as unknown[];
    const previousId = body['previous_response_id'];
    const previous =
      typeof previousId === 'string'
        ? (await deps.responses.load(principal, previousId, 'previous_response_id')).conversation
        : [];
    // The conversation as it would go to the model, tools kept (earlier calls name them) but not callable.
    // A hosted mcp tool's server is not contacted for a summary (nothing is called): its tools
    // are left out of the summary turn.
    const offered = Array.isArray(body['tools'])
      ? (body['tools'] as unknown[]).filter((t) => !(typeof t === 'object' && t !== null && (t as Obj)['type'] === 'mcp'))
      : body['tools'];
    const tools = Array.isArray(offered) && offered.length === 0 ? undefined : offered;
    const translated = translateRequest(
      { ...body, tools, input: input.slice(0, -1), tool_choice: 'none', stream: undefined, text: undefined },
      previous,
    );
    const chat = prepareChat(
      model,
      provider,
      { ...translated.body, messages: [...translated.body.messages, { role: 'user', content: SUMMARY_PROMPT }] },
      Math.min(SUMMARY_MAX_TOKENS, model.maxOutputTokens),
      'max_output_tokens',
    );
    const result = await deps.runner.complete(chat, run);
    const summary = result.completion.choices[0]?.message.content ?? '';
    const kept: Obj[] = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: SUMMARY_HEADER + summary }] },
    ];
    const item: Obj = {
      id: `cmp_${randomHex(24)}`,
      type: 'compaction',
      encrypted_content: await deps.seal.seal(principal.accountId, { v: 1, model: model.id, items: kept }),
    };
    const id = newResponseId();
    const response = responseObject(translated.echo, {
      id,
      createdAt: seconds(),
      status: 'completed',
      output: [item],
      incomplete: null,
      error: null,
      usage: responsesUsage(result.completion.usage, result.cost),
      completedAt: seconds(),
    });
    // Continued with previous_response_id, the conversation is the summary, as after any compaction.
    if (translated.echo.store) await deps.responses.save(principal, id, { response, conversation: kept });
    return { response, billing: result.billing, conversation: kept };
  }

  return {
    async expand(body, principal) {
      const input = body['input'];
      if (!Array.isArray(input) || !input.some((i) => isObj(i) && i['type'] === 'compaction')) return body;
      const out: unknown[] = [];
      for (const [i, item] of input.entries()) {
        if (!isObj(item) || item['type'] !== 'compaction') {
          out.push(item);
          continue;
        }
        const payload = await deps.seal.open(
          principal.accountId,
          item['encrypted_content'],
          `input[${i}].encrypted_content`,
        );
        const items = payload['items'];
        if (!Array.isArray(items))
          throw invalidArgument(`input[${i}].encrypted_content`, `Invalid 'input[${i}].encrypted_content'.`);
        out.push(...(items as unknown[]));
      }
      return { ...body, input: out };
    },

    triggered(body) {
      const input = body['input'];
      if (!Array.isArray(input)) return false;
      const at = input.findIndex((i) => isObj(i) && i['type'] === 'compaction_trigger');
      if (at < 0) return false;
      if (at !== input.length - 1)
        throw invalidArgument(
          `input[${at}]`,
          `Invalid 'input[${at}]': a compaction_trigger must be the final input item.`,
        );
      return true;
    },

    async create(body, principal, run) {
      const { response, billing } = await compact(body, principal, run);
      return { response, billing };
    },

    async *stream(body, principal, run) {
      let sequence = 0;
      const event = (type: string, fields: Obj): Obj => ({ type, sequence_number: sequence++, ...fields });
      const { response, billing } = await compact(body, principal, run);
      const output = response['output'] as Obj[];
      const item = output[0] ?? {};
      const pending = { ...response, status: 'in_progress', output: [], completed_at: null };
      delete (pending as Obj)['usage'];
      yield { event: event('response.created', { response: pending }) };
      yield { event: event('response.in_progress', { response: pending }) };
      yield { event: event('response.output_item.added', { output_index: 0, item }) };
      yield { event: event('response.output_item.done', { output_index: 0, item }) };
      yield { event: event('response.completed', { response }), billing };
    },
  };
}
