import { Metadata } from 'nice-grpc-common';
import { TunnelFrameKind, type TunnelFrame, type TunnelMetadataEntry } from '../../gen/svc/core/v1/tunnel';

/*
 * What both ends of the gateway's tunnel build and read (adapters/http/tunnel.ts, the gateway's;
 * core/server/tunnel.ts, the core's): a frame with its defaults, and metadata as frame entries.
 */

export { TunnelFrameKind, type TunnelFrame, type TunnelMetadataEntry };

const EMPTY = Buffer.alloc(0);

/** A frame of `kind` for call `call`, every other field at its default unless given. */
export function tunnelFrame(call: number, kind: TunnelFrameKind, fields: Partial<TunnelFrame> = {}): TunnelFrame {
  return {
    call,
    kind,
    method: '',
    metadata: [],
    message: EMPTY,
    credit: 0,
    code: 0,
    details: '',
    header: [],
    ...fields,
  };
}

/** Frame entries as metadata (a key may repeat). */
export function metadataOfEntries(entries: readonly TunnelMetadataEntry[]): Metadata {
  const metadata = Metadata();
  for (const { key, value } of entries) metadata.append(key, value);
  return metadata;
}

/** Metadata as frame entries; only text values cross the tunnel. */
export function entriesOfMetadata(metadata: Metadata | undefined): TunnelMetadataEntry[] {
  const entries: TunnelMetadataEntry[] = [];
  if (metadata !== undefined)
    for (const [key, values] of metadata)
      for (const value of values) if (typeof value === 'string') entries.push({ key, value });
  return entries;
}
