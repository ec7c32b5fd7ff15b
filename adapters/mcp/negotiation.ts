/** The legacy versions, negotiated through `initialize`, oldest first. */
export const LEGACY_PROTOCOL_VERSIONS: readonly string[] = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
/** The modern (stateless, per-request `_meta`) version, served without a handshake. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';
/** Every version svc speaks, newest first (the order `server/discover` and -32022 list them in). */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly string[] = [
  MODERN_PROTOCOL_VERSION,
  ...[...LEGACY_PROTOCOL_VERSIONS].reverse(),
];
/** The answer to an `initialize` asking for a version svc does not negotiate there. */
export const LATEST_LEGACY_VERSION = '2025-11-25';

/**
 * The version answered to `initialize`: the client's when it is a legacy version svc supports,
 * else the latest legacy one (as the lifecycle spec asks; a modern version has no handshake).
 */
export function negotiateVersion(requested: string): string {
  return LEGACY_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_LEGACY_VERSION;
}

/**
 * True when a protocol version has `field` (compares dates, which sort as strings): e.g.
 * `icons` and `websiteUrl` arrived in 2025-11-25, `title` and `outputSchema` in 2025-06-18.
 */
export function versionAtLeast(version: string, since: string): boolean {
  return version >= since;
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
