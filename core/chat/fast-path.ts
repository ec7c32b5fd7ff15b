import type { ChatCompletionParams } from '../../gen/svc/core/v1/chat';
import type { PreparedChat } from './prepare';

/**
 * The fast path (issue 35, DESIGN.md point 3): an OpenAI chat completion, streamed or not, whose
 * model's upstreams all speak that wire (`openai`) passes its answer through. Everything before the
 * upstream is decided and sent as for any call (auth, validation, model, allow-list, output
 * limit, hold, caps, idempotency, the upstream body itself); the upstream's chunks then go back to
 * the client as the upstream wrote them, svc's model id in place of the upstream's and
 * `"usage": null` dropped for a client that did not ask for usage
 * (`providers/llm/openai/pass-through.ts`), instead of being parsed into the neutral form,
 * carried as protobuf and written again. A chunk with a quirk the translation smooths over is
 * normalised as the translation would. Usage, cuts and error frames are read on the way exactly
 * as on the translated path; the final usage chunk, the money and the records are its own
 * (`runner.ts`). A non-stream answer likewise goes back as the upstream's JSON text, svc's model
 * id in place of the upstream's and svc's usage (with its cost, or svc's own count) in place of
 * the upstream's; one with a quirk the translation smooths over is translated
 * (`forwardableCompletion`).
 *
 * The native wires' streams pass through the same way (issue 35): an Anthropic Messages stream
 * to a model whose upstreams are all `anthropic`, a Gemini streamGenerateContent to one whose
 * upstreams are all `gemini`. The client's own body goes upstream as on the native path
 * (`native.ts`), and the upstream's events go back as it wrote them, svc's model id in place
 * (`NativeCalls.passThrough`, `providers/llm/pass-through-text.ts`); usage is read on the way by
 * the native path's reader, and Anthropic's `message_stop` reaches the client with the final
 * message, once the charge is settled, as on the native path.
 *
 * A Responses stream passes through too (`usesResponsesFastPath`, below): a CreateResponse body
 * that goes to an `openai-responses` upstream as it is (`responses/native.ts` `passesThrough`:
 * no `previous_response_id`, no `item_reference`, client tools only) and whose model's upstreams
 * all speak that wire. The upstream's events go to the client as it wrote them
 * (`NativeCalls.passThrough`), except what svc owns: the `response` object's `id`, `model` and
 * `store` in the events that carry one (edited in the text, written again from its JSON when an
 * edit cannot be made in place), compaction items wrapped for the account (those events written
 * again from their JSON), and the terminal `response.completed` / `.incomplete`, which reaches
 * the client only once the charge is settled, with svc's usage and its `cost` (svc's own count,
 * `estimated`, when the upstream sent none), and is kept with `store` as on the native path
 * (`responses/native.ts` `streamPassThrough`). A non-stream CreateResponse likewise goes back as
 * the upstream's JSON text with those members (and its usage's cost) edited in (`createNative`),
 * unless the upstream sent no usage or a compaction item is to be wrapped: those are written from
 * the JSON, as on the native path.
 *
 * These two functions are the one place that decides (with `fastPathEnabled`, the one switch). Translated are:
 * - everything when the fast path is off (`chat.fast_path: false`, or `SVC_FAST_PATH=0`, which
 *   wins over the file);
 * - a caller that did not offer to write pass-through answers (`pass_through`: only the
 *   OpenAI adapter's chat completions, streamed or not, and the Anthropic and Gemini adapters'
 *   streams do; gRPC clients and WebSocket mode get chunks and completions);
 * - a call with a native body whose model's upstreams do not all speak that wire with a fast path
 *   (such a body goes the native path, or the translation), and an OpenAI call to a model whose
 *   pass-through is another wire's;
 * - a model with any upstream that is not `openai` (for a native body: not of that wire), since a
 *   fallback must be able to serve the call;
 * - `n` above 1;
 * - a call with custom (freeform) tools, whose calls the translation turns back from the
 *   function the upstream was offered into custom tool calls (`proto.ts` `chunkTranslator`).
 */
export function usesFastPath(
  enabled: boolean,
  params: ChatCompletionParams,
  prepared: PreparedChat,
  customTools: boolean,
): boolean {
  if (!enabled || !params.passThrough || prepared.choices > 1) return false;
  const wire = prepared.provider.passThrough?.wire;
  // A native body (the Anthropic wire's): its pass-through is there only when the model's
  // upstreams all speak that wire (`withNativeBody`, router.ts).
  if (params.nativeBody !== undefined) return wire !== undefined && wire === params.nativeWire;
  return !customTools && wire === 'openai' && (params.clientWire === '' || params.clientWire === 'openai');
}

/**
 * The Responses API's fast path: a CreateResponse, streamed or not, whose body goes to an
 * `openai-responses` upstream as it is (`PreparedResponse.native`, responses/native.ts
 * `passesThrough`), from a caller that offered to write pass-through answers
 * (`StreamResponseRequest.pass_through`, `CreateResponseRequest.pass_through`: the OpenAI
 * adapter's POST /responses; gRPC clients, WebSocket mode and /responses/compact get events and
 * Response objects). Such a body's provider has
 * the pass-through when all the model's upstreams speak that wire (`withNativeBody`, router.ts).
 */
export function usesResponsesFastPath(
  enabled: boolean,
  passThrough: boolean,
  prepared: { readonly native: boolean; readonly chat: PreparedChat },
): boolean {
  return enabled && passThrough && prepared.native && prepared.chat.provider.passThrough?.wire === 'openai-responses';
}

/** Whether the fast path is on: `SVC_FAST_PATH` (0 or 1) when set, else `chat.fast_path` (default on). */
export function fastPathEnabled(configured: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  const flag = env['SVC_FAST_PATH'];
  if (flag === '0' || flag === 'false') return false;
  if (flag === '1' || flag === 'true') return true;
  return configured ?? true;
}
