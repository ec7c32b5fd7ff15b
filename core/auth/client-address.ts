import { createHash, timingSafeEqual } from 'node:crypto';
import type { CoreContext } from './context';

/** Metadata by which an adapter proves itself, so that the `client_address` it states is believed. */
export const ADAPTER_TOKEN_HEADER = 'x-svc-adapter-token';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The caller's own address from grpc-js's peer (`HOST:PORT`, IPv6 unbracketed): the port goes. */
function peerAddress(context: CoreContext): string {
  return context.peer.replace(/:\d{1,5}$/, '');
}

/**
 * Whose address a per-address limit counts (sign-in attempts, open client registration). Only
 * an adapter, which saw the client's socket, may state that address, and it must prove it is
 * an adapter (`x-svc-adapter-token`); any other caller of the core is counted by its own
 * address, or it could spread its attempts over made-up ones.
 */
export function clientAddressResolver(adapterToken: string | undefined) {
  const adapterDigest = adapterToken === undefined || adapterToken === '' ? undefined : digest(adapterToken);
  return (stated: string, context: CoreContext): string => {
    const token = context.metadata.get(ADAPTER_TOKEN_HEADER);
    const trusted =
      adapterDigest !== undefined && typeof token === 'string' && timingSafeEqual(digest(token), adapterDigest);
    return trusted ? stated : peerAddress(context);
  };
}
