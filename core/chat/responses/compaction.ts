import type { Principal } from '../../auth/types';
import { requireModel } from '../../auth/scope';
import type { BillingResult } from '../../billing/types';
import type { ModelConfig, SvcConfig } from '../../config/types';
import { invalidArgument, SvcError } from '../../errors';
import { findChatModel } from '../../models/catalog';
import type { PriceBook } from '../../pricing/book';
import type { ChatProvider, JsonObject } from '../../providers/llm/types';
import { randomHex } from '../../ids';
import { withNativeBody } from '../native';
import { prepareChat, type PreparedChat } from '../prepare';
import type { ChatRunner, RunContext } from '../runner';
import type { ResponseEventOut } from './events';
import { checkResponseFields } from './fields';
import { createNative, passesThrough, streamNative, wrapCompactions } from './native';
import { modelOf, translateRequest } from './request';
import { responseObject, responsesUsage } from './response';
import { newResponseId } from './common';
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
 *
 * Native compaction: when the model's upstreams compact themselves (`compaction: native`, an
 * openai-responses upstream; `NativeCalls.compact`) and the request passes through (native.ts),
 * the trigger, or POST /responses/compact, goes to the upstream as it is: its summary, its usage,
 * one hold and one settle through the runner. Its `compaction` item is the upstream's, opaque: svc
 * wraps it in its own seal, bound to the account and naming the upstream kind and model, and
 * unwraps it when it comes back, for an upstream of that kind that compacts natively; any other
 * model is a 400 naming the item. A request that cannot pass through (previous_response_id,
 * item_reference, a hosted tool) is compacted by svc, as on any other upstream.
 */

type Obj = JsonObject;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const SUMMARY_PROMPT = `You are performing a CONTEXT CHECKPOINT COMPACTION. Write a handoff summary of the conversation above for another model that will continue the work without seeing it. Include: the user's goal and requests, in their words where it matters; decisions made and why; the current state (what was done, files or data touched, results of tool calls that still matter); constraints and preferences; and the clear next steps. Be complete but concise. Answer with the summary only.`;

const SUMMARY_HEADER =
  'This conversation was compacted. Here is a summary of everything before this point, written for you to continue the work:\n\n';

// A summary needs no more; the hold is sized by it.
const SUMMARY_MAX_TOKENS = 8192;

/** A request's input as svc reads it (`expand`). */
export interface ExpandedInput {
  /**
   * The body with svc's own compaction items expanded in place; an upstream's (native) ones are
   * kept as the client sent them, for svc's translation, echo and store.
   */
  readonly body: Obj;
  /** The body as it goes to a native upstream: its own compaction items unwrapped. Absent: it has none. */
  readonly upstream?: Obj;
}

/** A triggered request, checked before anything is held: who compacts, and with what. */
export type PreparedCompaction =
  | { readonly by: 'svc'; readonly body: Obj; readonly principal: Principal }
  | {
      readonly by: 'upstream';
      /** POST /responses/compact (the upstream's own endpoint), or a final compaction_trigger. */
      readonly compact: boolean;
      readonly chat: PreparedChat;
      readonly store: boolean;
      readonly conversation: Obj[];
      readonly wrap: (item: Obj) => Promise<Obj>;
    };

export interface Compaction {
  /** The body with each `compaction` input item opened (expanded in place, or unwrapped for the upstream). */
  expand(body: Obj, principal: Principal): Promise<ExpandedInput>;
  /** Whether the input ends in a `compaction_trigger`; one anywhere else is a 400. */
  triggered(body: Obj): boolean;
  /** Checks a triggered request (`compact`: it came as POST /responses/compact) and decides who compacts it. */
  prepare(input: ExpandedInput, principal: Principal, compact: boolean): Promise<PreparedCompaction>;
  create(prepared: PreparedCompaction, run: RunContext): Promise<{ response: Obj; billing: BillingResult }>;
  stream(prepared: PreparedCompaction, run: RunContext): AsyncGenerator<ResponseEventOut>;
}

/** What svc seals around an upstream's own compaction item. */
const NATIVE = 'upstream';

/**
 * Seals each compaction item an upstream made (a native compaction, or one the upstream made on
 * its own in a passed-through turn) for `principal`'s account, naming the upstream kind and the
 * model; one upstream item is sealed once per response (its `output_item.done` and the
 * `response.completed` output carry the same text).
 */
export function nativeCompactionWrapper(
  seal: CompactionSeal,
  principal: Principal,
  model: Pick<ModelConfig, 'id' | 'upstreams'>,
  wire: string,
): (item: Obj) => Promise<Obj> {
  const sealed = new Map<string, Promise<string>>();
  return async (item) => {
    if (typeof item['encrypted_content'] !== 'string') return item;
    const original = item['encrypted_content'];
    let text = sealed.get(original);
    if (text === undefined) {
      text = seal.seal(principal.accountId, {
        v: 1,
        kind: NATIVE,
        wire,
        model: model.id,
        upstreams: model.upstreams.map((u) => u.name),
        item,
      });
      sealed.set(original, text);
    }
    return { ...item, encrypted_content: await text };
  };
}

export function createCompaction(deps: {
  config: Pick<SvcConfig, 'models'>;
  providers: ReadonlyMap<string, ChatProvider>;
  runner: ChatRunner;
  responses: ResponseStore;
  seal: CompactionSeal;
  now: () => number;
  /** Prices the call when it starts (SPEC §15). */
  prices: Pick<PriceBook, 'price'>;
}): Compaction {
  const seconds = (): number => Math.floor(deps.now() / 1000);

  /** Makes and seals the summary; the Response, and what a later `previous_response_id` continues from. */
  async function compact(
    body: Obj,
    principal: Principal,
    run: RunContext,
  ): Promise<{ response: Obj; billing: BillingResult; conversation: Obj[] }> {
    const model = await deps.prices.price(findChatModel(deps.config, modelOf(body)), principal.accountId);
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
    // are left out of the summary turn, and so is the hosted image_generation tool.
    const offered = Array.isArray(body['tools'])
      ? (body['tools'] as unknown[]).filter(
          (t) =>
            !(
              typeof t === 'object' &&
              t !== null &&
              ((t as Obj)['type'] === 'mcp' || (t as Obj)['type'] === 'image_generation')
            ),
        )
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

  /**
   * A native compaction item (`payload`) goes only to a model whose upstreams are of the kind that
   * made it and compact natively; anything else is the client's 400 naming the item.
   */
  function refuseUnlessNative(body: Obj, i: number, payload: Obj): void {
    const model = findChatModel(deps.config, modelOf(body));
    const native = deps.providers.get(model.id)?.native;
    const wire = String(payload['wire']);
    if (native?.wire === wire && native.compact !== undefined) return;
    const why =
      native?.wire !== wire
        ? `is not served by an ${wire} upstream`
        : `has an ${wire} upstream that does not compact natively (compaction: native in its configuration)`;
    throw invalidArgument(
      `input[${i}]`,
      `Invalid 'input[${i}]': this compaction item was made by the upstream of model '${String(payload['model'])}' (${wire}, native compaction) and only such an upstream can open it; model '${model.id}' ${why}. Send it with a model whose upstream compacts natively, or send the uncompacted input.`,
    );
  }

  return {
    async expand(body, principal) {
      const input = body['input'];
      if (!Array.isArray(input) || !input.some((i) => isObj(i) && i['type'] === 'compaction')) return { body };
      const out: unknown[] = [];
      const upstream: unknown[] = [];
      let native = false;
      for (const [i, item] of input.entries()) {
        if (!isObj(item) || item['type'] !== 'compaction') {
          out.push(item);
          upstream.push(item);
          continue;
        }
        const payload = await deps.seal.open(
          principal.accountId,
          item['encrypted_content'],
          `input[${i}].encrypted_content`,
        );
        if (payload['kind'] === NATIVE) {
          const original = payload['item'];
          if (!isObj(original))
            throw invalidArgument(`input[${i}].encrypted_content`, `Invalid 'input[${i}].encrypted_content'.`);
          refuseUnlessNative(body, i, payload);
          native = true;
          out.push(item);
          upstream.push(original);
          continue;
        }
        const items = payload['items'];
        if (!Array.isArray(items))
          throw invalidArgument(`input[${i}].encrypted_content`, `Invalid 'input[${i}].encrypted_content'.`);
        out.push(...(items as unknown[]));
        upstream.push(...(items as unknown[]));
      }
      return native
        ? { body: { ...body, input: out }, upstream: { ...body, input: upstream } }
        : { body: { ...body, input: out } };
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

    async prepare(input, principal, compactEndpoint) {
      const { body } = input;
      const model = await deps.prices.price(findChatModel(deps.config, modelOf(body)), principal.accountId);
      requireModel(principal, model.id, modelOf(body));
      const provider = deps.providers.get(model.id);
      if (provider === undefined) throw new SvcError('internal', `no provider for model ${model.id}`);
      const native = provider.native;
      if (native?.compact === undefined || !passesThrough(body, provider)) {
        checkResponseFields(body);
        return { by: 'svc', body, principal };
      }
      const compactUpstream = native.compact;
      // svc's reading of the request (the hold, the echo, the store) without the trigger; the
      // upstream gets the body as it is (its own compaction items unwrapped).
      const translated = translateRequest(
        { ...body, input: (body['input'] as unknown[]).slice(0, -1) },
        [],
        new Map(),
        new Map(),
        true,
      );
      const upstreamBody = input.upstream ?? body;
      const chat = withNativeBody(
        prepareChat(model, provider, translated.body, translated.requestedMax, 'max_output_tokens'),
        upstreamBody,
        'openai-responses',
      );
      const wrap = nativeCompactionWrapper(deps.seal, principal, model, native.wire);
      if (!compactEndpoint)
        return {
          by: 'upstream',
          compact: false,
          chat,
          store: translated.echo.store,
          conversation: translated.input,
          wrap,
        };
      // POST /responses/compact: the upstream's own endpoint, with the body the client sent it.
      const sent: Obj = { ...upstreamBody, input: (upstreamBody['input'] as unknown[]).slice(0, -1) };
      const viaCompact: PreparedChat = {
        ...chat,
        provider: {
          name: chat.provider.name,
          complete: (request, signal) => compactUpstream(sent, request, signal),
          stream: () => {
            throw new SvcError('internal', 'POST /responses/compact is not streamed');
          },
        },
      };
      return { by: 'upstream', compact: true, chat: viaCompact, store: false, conversation: [], wrap };
    },

    async create(prepared, run) {
      if (prepared.by === 'svc') {
        const { response, billing } = await compact(prepared.body, prepared.principal, run);
        return { response, billing };
      }
      if (!prepared.compact) return createNative(deps, prepared, run);
      const result = await deps.runner.complete(prepared.chat, run);
      const answer = result.completion.native;
      if (answer === undefined) throw new SvcError('internal', 'a native compaction returned no answer');
      const wrapped = await wrapCompactions(answer, prepared.wrap);
      const usage = isObj(wrapped['usage']) ? wrapped['usage'] : {};
      const response: Obj = {
        ...wrapped,
        id: newResponseId(),
        created_at: typeof wrapped['created_at'] === 'number' ? wrapped['created_at'] : seconds(),
        usage: { ...usage, cost: Number(result.cost) },
      };
      return { response, billing: result.billing };
    },

    async *stream(prepared, run) {
      if (prepared.by === 'upstream') {
        yield* streamNative(deps, prepared, run);
        return;
      }
      let sequence = 0;
      const event = (type: string, fields: Obj): Obj => ({ type, sequence_number: sequence++, ...fields });
      const { response, billing } = await compact(prepared.body, prepared.principal, run);
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
