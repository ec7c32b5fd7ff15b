import type { JsonObject } from '../providers/llm/types';
import type { PreparedChat } from './prepare';

/**
 * Native pass-through (DESIGN.md point 3): when the client's original body is in the wire its
 * model's upstream speaks, the call forwards that body (the provider replaces only the model and
 * the output limit) instead of the translation, so fields the neutral form cannot carry survive.
 * Everything else is decided as for any call, from the prepared neutral form: the model, the
 * output limit, the price. The hold's input bound also covers the body that is actually sent (one
 * token per byte, as `promptTokenUpperBound`), so a body richer than its translation cannot buy
 * more work than the hold covers. A body for another wire, or a provider without native calls,
 * leaves the call as it was.
 */
export function withNativeBody(
  prepared: PreparedChat,
  body: JsonObject | undefined,
  wire: string | undefined,
): PreparedChat {
  const native = prepared.provider.native;
  if (body === undefined || native === undefined || wire !== native.wire) return prepared;
  return {
    ...prepared,
    provider: {
      name: prepared.provider.name,
      complete: (request, signal) => native.complete(body, request, signal),
      stream: (request, signal) => native.stream(body, request, signal),
    },
    inputUpperBound: Math.max(prepared.inputUpperBound, Buffer.byteLength(JSON.stringify(body), 'utf8')),
  };
}
