import { withStringField } from '../pass-through-text';
import type { JsonObject } from '../types';

/*
 * The Anthropic fast path's event text (core/chat/fast-path.ts): an upstream event goes to the
 * client as its own JSON text, as the upstream wrote it (spacing, key order, escapes, fields svc
 * does not know, event types newer than svc), with svc's model id in `message_start` in place of
 * the upstream's. Only an event that cannot be written so is written again from its JSON: one
 * the upstream split over several data lines (one SSE data line carries it), and a
 * `message_start` whose model svc cannot replace in the text alone (the key written twice).
 */

/** `message_start` names the upstream's model; a client sees svc's. */
export function withModel(event: JsonObject, modelId: string): JsonObject {
  const message = event['message'];
  if (event['type'] !== 'message_start' || typeof message !== 'object' || message === null) return event;
  return { ...event, message: { ...(message as JsonObject), model: modelId } };
}

/**
 * The text of the event `data` (parsed as `event`) that goes to the client. `modelJson` is
 * `JSON.stringify(modelId)`.
 */
export function forwardedEvent(data: string, event: JsonObject, modelId: string, modelJson: string): string {
  if (data.includes('\n') || data.includes('\r')) return JSON.stringify(withModel(event, modelId));
  if (event['type'] !== 'message_start') return data;
  const message = event['message'] as JsonObject;
  const model = message['model'];
  if (model === modelId) return data;
  const out = typeof model === 'string' ? withStringField(data, 'model', model, modelJson) : undefined;
  return out ?? JSON.stringify(withModel(event, modelId));
}
