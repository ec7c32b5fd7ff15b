import type { Logger } from 'pino';
import { guardedFetch, GuardedFetchError, type GuardedFetchOptions } from '../net/guarded-fetch';
import { oauthError } from './oauth-error';
import { checkRedirectUris } from './redirect';

/** How a document is fetched (injectable for tests; the default is `guardedFetch`). */
export type DocumentFetcher = (url: string, options: GuardedFetchOptions) => Promise<{ body: Buffer }>;

/** The one sentence the browser sees whatever went wrong fetching or reading a document. */
export const DOCUMENT_UNREADABLE = "The client's metadata document could not be fetched.";

/** The client a Client ID Metadata Document describes. */
export interface DocumentClient {
  readonly clientName: string;
  readonly redirectUris: string[];
}

/**
 * Whether `clientId` names a metadata document: an https URL with a path (the MCP authorization
 * spec), or, only when `allowHttp` (test setups), an http URL.
 */
export function isDocumentClientId(clientId: string, allowHttp: boolean): boolean {
  if (!clientId.startsWith('https://') && !(allowHttp && clientId.startsWith('http://'))) return false;
  try {
    const url = new URL(clientId);
    return url.pathname !== '/' && url.hash === '' && url.username === '' && url.password === '';
  } catch {
    return false;
  }
}

export interface DocumentLoadOptions {
  /** Test setups only: fetch over http and from loopback or private addresses. */
  readonly insecure: boolean;
  readonly logger?: Logger;
  readonly fetch?: DocumentFetcher;
  /** Passed on to the fetcher (tests: a resolver, a shorter deadline). */
  readonly fetchOptions?: GuardedFetchOptions;
}

/**
 * Fetches and checks a Client ID Metadata Document: JSON, `client_id` equal to its URL, a name
 * and acceptable redirect URIs. The core asks the network only for a signed-in person's
 * authorization request, never for an anonymous caller, and only through `guardedFetch` (public
 * addresses only, pinned, no redirects, 64 KiB, a short deadline). Whatever goes wrong fetching
 * or parsing, the browser sees DOCUMENT_UNREADABLE and the detail goes to the log: an internal
 * answer's status or text must never reach the page.
 */
export async function loadClientDocument(url: string, options: DocumentLoadOptions): Promise<DocumentClient> {
  const unreadable = (reason: string): never => {
    options.logger?.warn({ clientId: url.slice(0, 300), reason }, 'oauth client metadata document not fetched');
    throw oauthError('invalid_client', DOCUMENT_UNREADABLE, 'client_id');
  };
  let doc: unknown;
  try {
    const { body } = await (options.fetch ?? guardedFetch)(url, {
      ...(options.insecure ? { allowHttp: true, allowPrivateAddresses: true } : {}),
      ...options.fetchOptions,
    });
    doc = JSON.parse(body.toString('utf8'));
  } catch (error) {
    return unreadable(
      error instanceof GuardedFetchError
        ? error.reason
        : error instanceof Error
          ? `${error.name}: ${error.message}`.slice(0, 300)
          : 'error',
    );
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return unreadable('not a JSON object');
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
