import type http from 'node:http';

/*
 * CORS for the model APIs (/v1/openai, /v1/anthropic, /v1/gemini), so browser clients work
 * (openai-node's `dangerouslyAllowBrowser`, the Anthropic SDK's browser mode, @google/genai in a
 * page). The key travels in a header, never a cookie: any origin may call, and credentials are
 * never allowed (`Access-Control-Allow-Credentials` is not sent), so a page can only spend a key
 * it already holds.
 */

// Request headers the SDKs send: the wildcard families are matched by prefix, since
// Access-Control-Allow-Headers takes no patterns (the preflight's own list is echoed back).
const ALLOWED_HEADERS = new Set([
  'authorization',
  'content-type',
  'accept',
  'idempotency-key',
  'x-api-key',
  'x-goog-api-key',
  'x-goog-api-client',
  'x-request-id',
  'x-client-request-id',
  'user-agent',
]);
const ALLOWED_PREFIXES = ['x-stainless-', 'anthropic-', 'openai-', 'x-goog-', 'x-codex-'];

// Response headers a page may read: the request id, cost, and what a client's retry logic reads.
const EXPOSED_HEADERS = [
  'x-request-id',
  'request-id',
  'x-svc-cost',
  'x-svc-balance',
  'x-svc-fitted',
  'x-svc-ignored-fields',
  'retry-after',
  'retry-after-ms',
  'x-should-retry',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
  'x-codex-turn-state',
  'openai-version',
  'openai-processing-ms',
].join(', ');

function allowed(header: string): boolean {
  const name = header.trim().toLowerCase();
  return ALLOWED_HEADERS.has(name) || ALLOWED_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/**
 * Adds the CORS headers to a model API response; answers a preflight (OPTIONS with
 * Access-Control-Request-Method) itself and returns true, so the app never sees it.
 */
export function handleCors(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  res.setHeader('access-control-allow-origin', '*');
  res.setHeader('vary', 'Origin');
  const method = req.headers['access-control-request-method'];
  if (req.method !== 'OPTIONS' || method === undefined) {
    res.setHeader('access-control-expose-headers', EXPOSED_HEADERS);
    return false;
  }
  const requested = (req.headers['access-control-request-headers'] ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '');
  res.statusCode = 204;
  res.setHeader('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS');
  res.setHeader('access-control-allow-headers', requested.filter(allowed).join(', ') || 'authorization, content-type');
  res.setHeader('access-control-max-age', '600');
  res.end();
  return true;
}
