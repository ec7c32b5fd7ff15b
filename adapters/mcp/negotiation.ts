/** The protocol version svc speaks by preference, and the others it accepts. */
export const PREFERRED_PROTOCOL_VERSION = '2025-06-18';
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = ['2025-06-18', '2025-11-25', '2025-03-26'];

/** The version answered to `initialize`: the client's when svc supports it, else svc's own. */
export function negotiateVersion(requested: string): string {
  return SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : PREFERRED_PROTOCOL_VERSION;
}

export type ResponseFormat = 'json' | 'sse';

function quality(params: string[]): number {
  for (const param of params) {
    const [key, value] = param.split('=').map((s) => s.trim());
    if (key === 'q' && value !== undefined) {
      const q = Number(value);
      return Number.isFinite(q) ? q : 0;
    }
  }
  return 1;
}

/**
 * Picks the response format from `Accept`: JSON unless the client ranks `text/event-stream`
 * strictly higher (or accepts only that). Undefined when it accepts neither. A missing header
 * means anything (curl, plain fetch).
 */
export function pickFormat(accept: string): ResponseFormat | undefined {
  if (accept.trim() === '') return 'json';
  let json = 0;
  let sse = 0;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = quality(params);
    if (range === 'application/json' || range === 'application/*' || range === '*/*') json = Math.max(json, q);
    if (range === 'text/event-stream' || range === 'text/*' || range === '*/*') sse = Math.max(sse, q);
  }
  if (json <= 0 && sse <= 0) return undefined;
  return sse > json ? 'sse' : 'json';
}

/** True when the Content-Type is JSON (parameters such as charset allowed). */
export function isJsonContentType(contentType: string): boolean {
  return contentType.split(';', 1)[0]?.trim().toLowerCase() === 'application/json';
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Origin validation against DNS rebinding: requests without Origin (non-browser clients) pass,
 * browser origins must be local or listed.
 */
export function isOriginAllowed(origin: string, allowed: readonly string[]): boolean {
  if (origin === '') return true;
  if (allowed.includes(origin) || allowed.includes('*')) return true;
  try {
    return LOCAL_HOSTS.has(new URL(origin).hostname);
  } catch {
    return false;
  }
}
