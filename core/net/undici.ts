/* eslint-disable @typescript-eslint/no-require-imports -- undici's own modules, below its index */
import type * as Undici from 'undici';

/*
 * The part of undici svc uses: Agent, Pool and the request API on every dispatcher.
 *
 * `require('undici')` loads the whole package (fetch, WebSocket, EventSource, the cache, mock and
 * retry agents, every interceptor: ~110 modules, 4.6 MiB of live heap), and its index is also what
 * puts `request`, `stream`, `pipeline`, `connect` and `upgrade` on Dispatcher.prototype. This
 * module requires only the dispatchers and the API (~30 modules, 1.7 MiB) and installs the API the
 * same way the index does, so `dispatcher.request(...)` and `dispatcher.compose(...)` behave as
 * before. Every live MiB counts about three times at load (V8 lets the old generation grow to a
 * multiple of what its last full GC found live): docs/performance.md, Memory.
 *
 * Tests and tools may still import 'undici' itself: it requires these same modules (one module
 * cache), so its Agent is this Agent, and its index assigns the same API functions again.
 */

const Dispatcher = require('undici/lib/dispatcher/dispatcher') as typeof Undici.Dispatcher;
Object.assign(Dispatcher.prototype, require('undici/lib/api') as object);

export const Agent = require('undici/lib/dispatcher/agent') as typeof Undici.Agent;
export type Agent = Undici.Agent;
export const Pool = require('undici/lib/dispatcher/pool') as typeof Undici.Pool;
export type Pool = Undici.Pool;
export type { Dispatcher } from 'undici';

/**
 * undici's top-level `request(url, options)` with `options.dispatcher` given: the same call on
 * that dispatcher, with the origin and path taken from the URL (its index's `makeDispatcher`).
 */
export function request(
  url: URL,
  options: { dispatcher: Undici.Dispatcher } & Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path'>,
): Promise<Undici.Dispatcher.ResponseData> {
  const { dispatcher, ...rest } = options;
  return dispatcher.request({
    ...rest,
    origin: url.origin,
    path: url.search ? `${url.pathname}${url.search}` : url.pathname,
    method: rest.method ?? (rest.body ? 'PUT' : 'GET'),
  } as Undici.Dispatcher.RequestOptions);
}
