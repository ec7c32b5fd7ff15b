import type { Dispatcher } from 'undici';
import { deadline } from '../net/deadline';

/** A gateway's JSON answer: its HTTP status and parsed body (undefined when the body is not JSON). */
export interface GatewayAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly text: string;
}

// A gateway answer is a few hundred bytes; anything this large is not one.
const MAX_ANSWER_BYTES = 256 * 1024;

/**
 * POSTs `body` as JSON to `{baseUrl}{path}` through the core's dispatcher. Resolves with the
 * answer whatever its status; rejects only when there is none (timeout, refused or dropped
 * connection, an oversized body): the caller treats that as "unknown", never as a refusal.
 */
export async function postJson(
  dispatcher: Dispatcher,
  options: { readonly baseUrl: string; readonly path: string; readonly body: unknown; readonly timeoutMs: number },
  signal: AbortSignal,
): Promise<GatewayAnswer> {
  const base = new URL(options.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  let status = 0;
  const limit = deadline(options.timeoutMs, signal);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    const res = await dispatcher.request({
      origin: base.origin,
      method: 'POST',
      path: `${prefix}${options.path}`,
      headers: { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'svc/0.1 (+payments)' },
      body: JSON.stringify(options.body),
      signal: limit.signal,
    });
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        res.body.destroy();
        throw new Error(`answer over ${MAX_ANSWER_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
    status = res.statusCode;
  } finally {
    limit.clear();
  }
  const text = Buffer.concat(chunks, size).toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    body = undefined;
  }
  return { status, body, text };
}

/** A plain-object view of an unknown JSON value (`data: []` on an error reads as `{}`). */
export function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

/** An integer that may arrive as a number or as a string (`"code":"100"`); undefined otherwise. */
export function int(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value === 'string' && /^-?\d{1,18}$/.test(value.trim())) return Number(value.trim());
  return undefined;
}

/** An integer of any size as its decimal text (a receipt number can pass 2^53 as a JSON number… or arrive as text). */
export function digits(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === 'string' && /^\d{1,40}$/.test(value.trim())) return value.trim();
  if (typeof value === 'bigint' && value >= 0n) return value.toString();
  return '';
}

export function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** A short, single-line excerpt of a body for the operator's log. */
export function excerpt(text: string): string {
  return text.replace(/\s+/g, ' ').slice(0, 300);
}

/**
 * A field's integer exactly as the body wrote it (JSON.parse rounds integers past 2^53): the
 * digits after `"name":` (quoted or not), or '' when absent.
 */
export function rawDigits(text: string, name: string): string {
  const match = new RegExp(`"${name}"\\s*:\\s*"?(\\d{1,40})"?`).exec(text);
  return match?.[1] ?? '';
}
