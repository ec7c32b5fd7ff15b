import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { deadline } from './deadline';
import { Agent, request } from './undici';

/*
 * The one way svc fetches a URL that a client chose (issue 31): today the OAuth Client ID
 * Metadata Documents (core/oauth/metadata-document.ts); the hosted `mcp` tool's server_url reuses
 * it. Such a URL must not reach svc's own network (SSRF), so every fetch:
 *
 * - takes https only (`allowHttp` is a switch for test setups);
 * - resolves the host name once and refuses it unless EVERY address it resolves to is a public
 *   unicast address: loopback, private (RFC 1918), link-local (cloud metadata at 169.254.169.254
 *   included), unique-local, multicast, CGNAT, unspecified, broadcast, documentation, benchmarking
 *   and every other special range are refused, in IPv4, IPv6 and IPv4-mapped IPv6 alike
 *   (classification by `ipaddr.js`: anything whose range is not `unicast`); an IP literal is
 *   checked the same way;
 * - connects to the address that was checked: the connection's `lookup` hands back that address,
 *   so a second resolution (DNS rebinding) cannot swap in another one; TLS still verifies the
 *   certificate for the host name;
 * - follows no redirect (a 3xx is a failure: its Location may be internal);
 * - reads at most `maxBytes` (64 KiB by default) and aborts the connection the moment the body
 *   passes it, whether or not a Content-Length was sent (chunked bodies included);
 * - finishes within one total deadline (`timeoutMs`, 3 s by default) for resolution, connection,
 *   headers and body together, and, by default, fails no sooner than that deadline
 *   (`padFailures`), so that the time a failure takes tells nothing about the address or port.
 *
 * Every failure is one `GuardedFetchError`: its `reason` (what happened, for the log) must never
 * reach the client; callers show one fixed sentence instead.
 */

/** A failed guarded fetch. `reason` is for the log only: never show it to the client. */
export class GuardedFetchError extends Error {
  /**
   * `status`: the HTTP status of a non-2xx answer (the server was reached: it passed the address
   * check), which a caller may show; absent for every other failure.
   */
  constructor(
    readonly reason: string,
    readonly status?: number,
  ) {
    super(`guarded fetch failed: ${reason}`);
    this.name = 'GuardedFetchError';
  }
}

/** One resolved address, as `dns.lookup(name, {all: true})` gives it. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to its addresses (injectable: tests map names to loopback addresses). */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export interface GuardedFetchOptions {
  /** Test setups only: allow `http:` URLs (default: https only). */
  readonly allowHttp?: boolean;
  /** Test setups only: allow loopback and private addresses (default: public unicast only). */
  readonly allowPrivateAddresses?: boolean;
  /** The body cap in bytes (default 64 KiB). */
  readonly maxBytes?: number;
  /** The total deadline in milliseconds (default 3000). */
  readonly timeoutMs?: number;
  /** Whether a failure is answered no sooner than the deadline (default true). */
  readonly padFailures?: boolean;
  /** The `accept` request header (default `application/json`). */
  readonly accept?: string;
  /** The method (default GET). */
  readonly method?: 'GET' | 'POST' | 'DELETE';
  /** More request headers (sent to this URL's server only; never logged). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The request body (a POST's JSON). */
  readonly body?: string;
  /** Name resolution (default the system resolver, `dns.lookup` with `all`). */
  readonly resolve?: Resolver;
  /** Aborts the fetch (e.g. the client went away); the failure is then not padded. */
  readonly signal?: AbortSignal;
}

export interface GuardedResponse {
  /** Always 2xx: any other status is a failure. */
  readonly status: number;
  readonly contentType: string;
  /** The answer's single-valued headers, names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export const DEFAULT_MAX_BYTES = 64 * 1024;
export const DEFAULT_TIMEOUT_MS = 3000;

const systemResolver: Resolver = async (hostname) => {
  const found = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/**
 * Whether `address` is a public unicast address: IPv4-mapped IPv6 is judged as the IPv4 address
 * it carries; every special range `ipaddr.js` knows (loopback, private, linkLocal, uniqueLocal,
 * multicast, carrierGradeNat, unspecified, broadcast, reserved, 6to4, teredo, rfc6052, …) is not.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  return ipaddr.process(address).range() === 'unicast';
}

function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** The one address to connect to, after every address of the name passed the check. */
async function checkedAddress(hostname: string, resolve: Resolver, allowPrivate: boolean): Promise<ResolvedAddress> {
  const host = bareHost(hostname);
  let addresses: readonly ResolvedAddress[];
  if (ipaddr.isValid(host)) addresses = [{ address: host, family: ipaddr.parse(host).kind() === 'ipv6' ? 6 : 4 }];
  else {
    try {
      addresses = await resolve(host);
    } catch (error) {
      throw new GuardedFetchError(`cannot resolve ${host}: ${error instanceof Error ? error.message : 'error'}`);
    }
  }
  const first = addresses[0];
  if (first === undefined) throw new GuardedFetchError(`${host} resolves to no address`);
  if (!allowPrivate) {
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    if (refused !== undefined)
      throw new GuardedFetchError(
        `${host} resolves to ${refused.address}, which is not a public address (${ipaddr.isValid(refused.address) ? ipaddr.process(refused.address).range() : 'invalid'})`,
      );
  }
  return first;
}

/** A connection `lookup` that answers every query with the address already checked. */
function pinnedLookup(pinned: ResolvedAddress): LookupFunction {
  return (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all === true)
      (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
}

async function attempt(url: URL, options: GuardedFetchOptions, signal: AbortSignal): Promise<GuardedResponse> {
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && options.allowHttp === true))
    throw new GuardedFetchError(`scheme ${url.protocol} is not allowed`);
  if (url.username !== '' || url.password !== '') throw new GuardedFetchError('credentials in the URL');
  const pinned = await checkedAddress(
    url.hostname,
    options.resolve ?? systemResolver,
    options.allowPrivateAddresses === true,
  );
  signal.throwIfAborted();
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const agent = new Agent({
    connect: { lookup: pinnedLookup(pinned) },
    connections: 1,
    pipelining: 0,
  });
  try {
    const res = await request(url, {
      dispatcher: agent,
      method: options.method ?? 'GET',
      headers: { ...options.headers, accept: options.accept ?? 'application/json', 'user-agent': 'svc' },
      ...(options.body === undefined ? {} : { body: options.body }),
      signal,
    });
    // Destroying the body aborts the connection (no more of it is read); its abort error is ours.
    res.body.on('error', () => undefined);
    const abandon = (reason: string, status?: number): never => {
      res.body.destroy();
      throw new GuardedFetchError(reason, status);
    };
    if (res.statusCode < 200 || res.statusCode > 299) abandon(`HTTP ${res.statusCode}`, res.statusCode);
    const length = Number(res.headers['content-length'] ?? '0');
    if (length > maxBytes) abandon(`Content-Length ${length} is above the cap of ${maxBytes} bytes`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > maxBytes) abandon(`body passed the cap of ${maxBytes} bytes`);
      chunks.push(buffer);
    }
    const type = res.headers['content-type'];
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') headers[name] = value;
    return {
      status: res.statusCode,
      contentType: typeof type === 'string' ? type : '',
      headers,
      body: Buffer.concat(chunks),
    };
  } finally {
    void agent.destroy().catch(() => undefined);
  }
}

/**
 * Fetches `url` (a GET unless `method` says otherwise) under the guard described at the top of this file; any failure is a
 * `GuardedFetchError` (answered no sooner than the deadline unless `padFailures` is false or the
 * caller's own signal fired).
 */
export async function guardedFetch(url: string, options: GuardedFetchOptions = {}): Promise<GuardedResponse> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const started = Date.now();
  const limit = deadline(timeoutMs, options.signal);
  try {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new GuardedFetchError('not a URL');
    }
    return await attempt(parsed, options, limit.signal);
  } catch (error) {
    const failure =
      error instanceof GuardedFetchError
        ? error
        : new GuardedFetchError(
            limit.expired
              ? `no complete answer within ${timeoutMs} ms`
              : error instanceof Error
                ? `${error.name}: ${error.message}`.slice(0, 300)
                : 'error',
          );
    const left = started + timeoutMs - Date.now();
    if (options.padFailures !== false && left > 0 && options.signal?.aborted !== true)
      await new Promise((resolve) => setTimeout(resolve, left));
    throw failure;
  } finally {
    limit.clear();
  }
}
