const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);
const CONNECT = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);
const TIMEOUT = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ABORT_ERR',
  'TimeoutError',
]);

function isTls(code: string): boolean {
  return (
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    code.startsWith('CERT_') ||
    code === 'EPROTO' ||
    code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
    code === 'SELF_SIGNED_CERT_IN_CHAIN' ||
    code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' ||
    code === 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY' ||
    code === 'HOSTNAME_MISMATCH'
  );
}

/**
 * Why an upstream attempt failed, for the operator's log line and span (never for the client):
 * `dns ENOTFOUND`, `connect ECONNREFUSED`, `tls CERT_HAS_EXPIRED`, `timeout UND_ERR_HEADERS_TIMEOUT`,
 * `http 502`. Codes and statuses only: no message, so no URL, key or body can reach it.
 * Undefined when the failure carries none (the svc error code alone says it).
 */
export function upstreamCause(error: unknown): string | undefined {
  let current: unknown = error;
  let status: number | undefined;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth += 1) {
    const e = current as { code?: unknown; name?: unknown; status?: unknown; cause?: unknown; errors?: unknown };
    if (typeof e.status === 'number' && status === undefined) status = e.status;
    const code = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : undefined;
    if (code !== undefined) {
      if (DNS.has(code)) return `dns ${code}`;
      if (CONNECT.has(code)) return `connect ${code}`;
      if (isTls(code)) return `tls ${code}`;
      if (TIMEOUT.has(code)) return `timeout ${code}`;
    }
    // An AggregateError (happy eyeballs tried several addresses): its first error says why.
    const first = Array.isArray(e.errors) ? (e.errors as unknown[])[0] : undefined;
    current = e.cause ?? first;
  }
  return status === undefined ? undefined : `http ${status}`;
}
