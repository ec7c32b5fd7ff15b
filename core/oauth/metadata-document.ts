import { isIP } from 'node:net';
import { oauthError } from './oauth-error';
import { checkRedirectUris } from './redirect';

/** Fetches a document's JSON text (injectable for tests; the default is `fetch`, no redirects). */
export type DocumentFetcher = (url: string, signal: AbortSignal) => Promise<string>;

const MAX_BYTES = 64 * 1024;
const TIMEOUT_MS = 5000;

/** The client a Client ID Metadata Document describes. */
export interface DocumentClient {
  readonly clientName: string;
  readonly redirectUris: string[];
}

async function fetchText(url: string, signal: AbortSignal): Promise<string> {
  const res = await fetch(url, { redirect: 'error', signal, headers: { accept: 'application/json' } });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  if (Number(res.headers.get('content-length') ?? '0') > MAX_BYTES) throw new Error('document too large');
  const text = await res.text();
  if (text.length > MAX_BYTES) throw new Error('document too large');
  return text;
}

/**
 * Whether `clientId` names a metadata document: an https URL with a path (the MCP authorization
 * spec), or, only when `allowLoopbackHttp` (tests), an http URL on 127.0.0.1.
 */
export function isDocumentClientId(clientId: string, allowLoopbackHttp: boolean): boolean {
  if (!clientId.startsWith('https://') && !(allowLoopbackHttp && clientId.startsWith('http://127.0.0.1:')))
    return false;
  try {
    const url = new URL(clientId);
    return url.pathname !== '/' && url.hash === '' && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}

/**
 * Fetches and checks a Client ID Metadata Document: JSON, `client_id` equal to its URL, a name
 * and acceptable redirect URIs. The core asks the network only for a signed-in person's
 * authorization request, never for an anonymous caller; IP-literal and `localhost` hosts are
 * refused so that a document URL cannot probe the service's own network.
 */
export async function loadClientDocument(
  url: string,
  options: { fetchText?: DocumentFetcher; allowLoopbackHttp: boolean },
): Promise<DocumentClient> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (!options.allowLoopbackHttp && (isIP(host) !== 0 || host === 'localhost' || host.endsWith('.localhost')))
    throw oauthError(
      'invalid_client',
      'A client metadata document must be served from a public host name.',
      'client_id',
    );
  let doc: unknown;
  try {
    const text = await (options.fetchText ?? fetchText)(url, AbortSignal.timeout(TIMEOUT_MS));
    doc = JSON.parse(text);
  } catch (error) {
    throw oauthError(
      'invalid_client',
      `The app's client metadata document could not be read (${error instanceof Error ? error.message.slice(0, 100) : 'error'}).`,
      'client_id',
    );
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw oauthError('invalid_client', "The app's client metadata document is not a JSON object.", 'client_id');
  const m = doc as Record<string, unknown>;
  if (m['client_id'] !== url)
    throw oauthError(
      'invalid_client',
      "The app's client metadata document names another client_id than its own URL.",
      'client_id',
    );
  const name = typeof m['client_name'] === 'string' ? m['client_name'] : '';
  const uris = Array.isArray(m['redirect_uris'])
    ? m['redirect_uris'].filter((u): u is string => typeof u === 'string')
    : [];
  const method = m['token_endpoint_auth_method'];
  if (method !== undefined && method !== 'none')
    throw oauthError(
      'invalid_client',
      "Only public clients are supported: the document's token_endpoint_auth_method must be 'none'.",
      'client_id',
    );
  let redirectUris: string[];
  try {
    redirectUris = checkRedirectUris(uris);
  } catch (error) {
    throw oauthError(
      'invalid_client',
      `The app's client metadata document has bad redirect_uris: ${error instanceof Error ? error.message : ''}`,
      'client_id',
    );
  }
  return { clientName: name, redirectUris };
}
