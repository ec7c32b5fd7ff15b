import { SvcError } from '../errors';
import { knownBound, type PromptBound } from '../providers/llm/tokens';
import type { JsonObject, NativeCalls, PassThroughBatch, WireChatRequest } from '../providers/llm/types';
import type { PreparedChat } from './prepare';

/**
 * Native pass-through (DESIGN.md point 3): when the client's original body is in the wire its
 * model's upstream speaks, the call forwards that body (the provider replaces only the model and
 * the output limit) instead of the translation, so fields the neutral form cannot carry survive.
 * Everything else is decided as for any call, from the prepared neutral form: the model, the
 * output limit, the price. The hold's input bound also covers the body that is actually sent (one
 * token per byte, as `promptTokenUpperBound`), so a body richer than its translation cannot buy
 * more work than the hold covers. A body for another wire, or a provider without native calls,
 * leaves the call as it was, unless the body has fields only that wire can serve (`nativeOnly`,
 * named by the adapter): such a call is refused here, before anything is held.
 */
export function withNativeBody(
  prepared: PreparedChat,
  body: JsonObject | undefined,
  wire: string | undefined,
  nativeOnly: readonly string[] = [],
  headers: Readonly<Record<string, string>> = {},
): PreparedChat {
  const native = prepared.provider.native;
  if (body === undefined || native === undefined || wire !== native.wire) {
    const field = nativeOnly[0];
    if (field !== undefined)
      throw new SvcError(
        'unsupported_parameter',
        `'${field}' is served only when the model's upstream speaks the ${wire ?? 'same'} API natively; ` +
          `model ${prepared.model.id} is served through a translation that cannot carry it.`,
        { param: field },
      );
    return prepared;
  }
  return {
    ...prepared,
    provider: {
      name: prepared.provider.name,
      complete: (request, signal) => native.complete(body, request, signal, headers),
      stream: (request, signal) => native.stream(body, request, signal, headers),
      // The wire's fast path, when the provider has one (core/chat/fast-path.ts decides).
      ...(native.passThrough === undefined
        ? {}
        : {
            passThrough: {
              wire: native.wire,
              stream: (request, _includeUsage, signal) => passThrough(native, body, request, signal, headers),
            },
          }),
    },
    inputUpperBound: nativeBound(prepared.inputUpperBound, Buffer.byteLength(JSON.stringify(body), 'utf8')),
  };
}

/** The translated prompt's bound, raised to the native body's bytes (one token per byte at most). */
function nativeBound(bound: PromptBound, bodyBytes: number): PromptBound {
  return knownBound(Math.max(bound.bytes, bodyBytes), async () => Math.max(await bound.value(), bodyBytes));
}

function passThrough(
  native: NativeCalls,
  body: JsonObject,
  request: WireChatRequest,
  signal: AbortSignal,
  headers: Readonly<Record<string, string>>,
): AsyncIterable<PassThroughBatch> {
  if (native.passThrough === undefined) throw new SvcError('internal', `no ${native.wire} fast path`);
  return native.passThrough(body, request, signal, headers);
}
