import { type Readable, Transform, type TransformCallback } from 'node:stream';
import zlib from 'node:zlib';
import { Decompress } from 'fzstd';
import { SvcError } from '../../core/edge';

/**
 * Request bodies sent with `Content-Encoding` (SPEC §13 "What the clients send, accepted"): gzip,
 * deflate (zlib-wrapped, or raw as some clients send it), br and zstd, and a list of them applied
 * in order. Node 20's `node:zlib` has no zstd, so `fzstd` decodes it. The decoded size is what
 * counts against `limits.max_body_bytes`, counted while decoding: a decompression bomb stops
 * being inflated as soon as it passes the limit.
 */
export const CONTENT_ENCODINGS = ['gzip', 'x-gzip', 'deflate', 'br', 'zstd'] as const;

/** The largest zstd window svc allocates for, beyond the body limit itself. */
const MIN_ZSTD_WINDOW = 8 * 1024 * 1024;

export function tooLarge(maxBytes: number): SvcError {
  return new SvcError('request_too_large', `Request body is larger than the limit of ${maxBytes} bytes`);
}

/**
 * The decoders of a `Content-Encoding` header, in the order they apply (the last coding named was
 * applied last, so it is undone first); `[]` for none or `identity`. Throws `unsupported_encoding`
 * (415) for a coding svc does not decode.
 */
export function decodersFor(header: string): string[] {
  const codings = header
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity');
  for (const coding of codings) {
    if (!(CONTENT_ENCODINGS as readonly string[]).includes(coding)) {
      throw new SvcError(
        'unsupported_encoding',
        `Unsupported Content-Encoding '${coding.slice(0, 40)}': svc decodes ${CONTENT_ENCODINGS.filter((c) => c !== 'x-gzip').join(', ')} and identity.`,
        { param: 'content-encoding' },
      );
    }
  }
  if (codings.length > 3)
    throw new SvcError('unsupported_encoding', 'At most three content codings are decoded.', {
      param: 'content-encoding',
    });
  return codings.reverse();
}

function corrupt(coding: string): SvcError {
  return new SvcError(
    'invalid_encoding',
    `The request body could not be decoded as ${coding === 'x-gzip' ? 'gzip' : coding} (its Content-Encoding).`,
    { param: 'content-encoding' },
  );
}

/**
 * Decodes `input` (the request's bytes) through `codings` (from `decodersFor`) and collects the
 * result, refusing it with `request_too_large` once more than `maxBytes` came out (or went in).
 */
export async function decodeBody(input: Readable, codings: readonly string[], maxBytes: number): Promise<Buffer> {
  const stages = codings.map((coding) => decoderStream(coding, maxBytes));
  const first = stages[0] as Transform;
  const last = stages[stages.length - 1] as Transform;
  // Stage errors (a corrupt body, a zstd window or frame past the limit) reach `last`, whose
  // reader below throws them. The no-op listeners keep a late error from being unhandled.
  for (const [index, stage] of stages.entries()) {
    stage.on('error', () => undefined);
    const next = stages[index + 1];
    if (next !== undefined) {
      stage.pipe(next);
      stage.once('error', (error) => next.destroy(error));
    }
  }
  let wire = 0;
  const onData = (chunk: Buffer): void => {
    wire += chunk.length;
    if (wire > maxBytes) first.destroy(tooLarge(maxBytes));
  };
  const onError = (error: Error): void => {
    first.destroy(error);
  };
  // A client that goes away mid-body: piping would wait for an end that never comes.
  const onClose = (): void => {
    if (!input.readableEnded)
      first.destroy(new SvcError('cancelled', 'The client closed the request before its body arrived'));
  };
  input.on('data', onData);
  input.once('error', onError);
  input.once('close', onClose);
  input.pipe(first);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of last as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw tooLarge(maxBytes);
      chunks.push(chunk);
    }
  } catch (error) {
    for (const stage of stages) stage.destroy();
    throw error instanceof SvcError ? error : corrupt([...codings].reverse().join(', '));
  } finally {
    input.unpipe(first);
    input.removeListener('data', onData);
    input.removeListener('error', onError);
    input.removeListener('close', onClose);
  }
  return Buffer.concat(chunks, size);
}

function decoderStream(coding: string, maxBytes: number): Transform {
  switch (coding) {
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'br':
      return zlib.createBrotliDecompress();
    case 'deflate':
      return new DeflateDecoder();
    default:
      return new ZstdDecoder(maxBytes);
  }
}

/**
 * `deflate` is the zlib format (RFC 9110), but some clients send a raw deflate stream: the first
 * two bytes tell them apart (a zlib header is a multiple of 31 with compression method 8).
 */
class DeflateDecoder extends Transform {
  private inner: Transform | undefined;
  private head = Buffer.alloc(0);

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.inner === undefined) {
      this.head = Buffer.concat([this.head, chunk]);
      if (this.head.length < 2) return done();
      const [cmf, flg] = [this.head[0] as number, this.head[1] as number];
      const zlibWrapped = (cmf & 0x0f) === 8 && (cmf * 256 + flg) % 31 === 0;
      const inner = zlibWrapped ? zlib.createInflate() : zlib.createInflateRaw();
      this.inner = inner;
      inner.on('data', (data: Buffer) => {
        if (!this.push(data)) inner.pause();
      });
      inner.on('error', () => this.destroy(corrupt('deflate')));
      chunk = this.head;
    }
    const inner = this.inner;
    if (inner.write(chunk)) done();
    else inner.once('drain', () => done());
  }

  override _read(size: number): void {
    this.inner?.resume();
    super._read(size);
  }

  override _flush(done: TransformCallback): void {
    const inner = this.inner;
    if (inner === undefined) return done(this.head.length === 0 ? null : corrupt('deflate'));
    inner.once('end', () => done());
    inner.end();
  }

  override _destroy(error: Error | null, done: (error: Error | null) => void): void {
    this.inner?.destroy();
    done(error === null || error instanceof SvcError ? error : corrupt('deflate'));
  }
}

/**
 * zstd through fzstd's streaming decoder, which allocates each frame's window (for a
 * single-segment frame: its whole declared size) when the frame begins and may decode thousands
 * of blocks from one input chunk. So every frame header is read here first (a frame whose window
 * or declared size passes the limit is refused before fzstd sees it), and the output is counted
 * as fzstd produces it, stopping it past the limit.
 */
class ZstdDecoder extends Transform {
  private readonly decoder: Decompress;
  private readonly frames: ZstdFrameWalker;
  private produced = 0;

  constructor(private readonly maxBytes: number) {
    super();
    this.frames = new ZstdFrameWalker(maxBytes);
    this.decoder = new Decompress((data) => {
      this.produced += data.length;
      if (this.produced > this.maxBytes) throw tooLarge(this.maxBytes);
      if (data.length > 0) this.push(Buffer.from(data));
    });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    try {
      this.frames.feed(chunk);
      this.decoder.push(chunk);
      done();
    } catch (error) {
      done(error instanceof SvcError ? error : corrupt('zstd'));
    }
  }

  override _flush(done: TransformCallback): void {
    try {
      if (!this.frames.atBoundary()) throw corrupt('zstd');
      this.decoder.push(new Uint8Array(0), true);
      done();
    } catch (error) {
      done(error instanceof SvcError ? error : corrupt('zstd'));
    }
  }
}

const ZSTD_MAGIC = 0xfd2fb528;

/**
 * Walks the frame structure of a zstd stream (RFC 8878 §3.1) as its bytes arrive, without
 * decoding: frame headers, block headers, checksums and skippable frames. It refuses a frame
 * whose window (or, single-segment, its content size) passes what svc would allocate.
 */
class ZstdFrameWalker {
  private buffered = Buffer.alloc(0);
  /** Bytes of the current frame's content still to skip (a block's body, a skippable frame). */
  private skip = 0;
  private state: 'frame' | 'block' | 'checksum' = 'frame';
  private checksum = false;
  private lastBlock = false;

  constructor(private readonly maxBytes: number) {}

  atBoundary(): boolean {
    return this.state === 'frame' && this.skip === 0 && this.buffered.length === 0;
  }

  feed(chunk: Buffer): void {
    let data = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    for (;;) {
      if (this.skip > 0) {
        const taken = Math.min(this.skip, data.length);
        this.skip -= taken;
        data = data.subarray(taken);
        if (this.skip > 0) break;
        if (this.lastBlock && this.state === 'block') {
          this.lastBlock = false;
          this.state = this.checksum ? 'checksum' : 'frame';
        }
      }
      const used = this.step(data);
      if (used === 0) break;
      data = data.subarray(used);
    }
    this.buffered = Buffer.from(data);
  }

  /** Reads one header from `data`; the bytes it used, or 0 when more are needed. */
  private step(data: Buffer): number {
    if (this.state === 'checksum') {
      if (data.length < 4) return 0;
      this.state = 'frame';
      return 4;
    }
    if (this.state === 'block') {
      if (data.length < 3) return 0;
      const header = (data[0] as number) | ((data[1] as number) << 8) | ((data[2] as number) << 16);
      this.lastBlock = (header & 1) === 1;
      const type = (header >> 1) & 3;
      const size = header >>> 3;
      if (type === 3) throw corrupt('zstd');
      this.skip = type === 1 ? 1 : size;
      if (this.skip === 0 && this.lastBlock) {
        this.lastBlock = false;
        this.state = this.checksum ? 'checksum' : 'frame';
      }
      return 3;
    }
    if (data.length < 4) return 0;
    const magic = data.readUInt32LE(0);
    if ((magic & 0xfffffff0) === 0x184d2a50) {
      if (data.length < 8) return 0;
      this.skip = data.readUInt32LE(4);
      return 8;
    }
    if (magic !== ZSTD_MAGIC) throw corrupt('zstd');
    if (data.length < 5) return 0;
    const descriptor = data[4] as number;
    const singleSegment = (descriptor >> 5) & 1;
    const dictionaryBytes = [0, 1, 2, 4][descriptor & 3] as number;
    const sizeFlag = descriptor >> 6;
    const sizeBytes = sizeFlag === 0 ? singleSegment : 1 << sizeFlag;
    const headerBytes = 5 + (singleSegment ? 0 : 1) + dictionaryBytes + sizeBytes;
    if (data.length < headerBytes) return 0;
    if ((descriptor & 8) !== 0) throw corrupt('zstd');
    let window: number;
    const sizeAt = 5 + (singleSegment ? 0 : 1) + dictionaryBytes;
    let contentSize = -1;
    if (sizeBytes === 1) contentSize = data[sizeAt] as number;
    else if (sizeBytes === 2) contentSize = data.readUInt16LE(sizeAt) + 256;
    else if (sizeBytes === 4) contentSize = data.readUInt32LE(sizeAt);
    else if (sizeBytes === 8) contentSize = Number(data.readBigUInt64LE(sizeAt));
    if (contentSize > this.maxBytes) throw tooLarge(this.maxBytes);
    if (singleSegment) window = contentSize;
    else {
      const windowDescriptor = data[5] as number;
      const base = 2 ** (10 + (windowDescriptor >> 3));
      window = base + (base / 8) * (windowDescriptor & 7);
    }
    if (window > Math.max(this.maxBytes, MIN_ZSTD_WINDOW)) throw tooLarge(this.maxBytes);
    this.checksum = ((descriptor >> 2) & 1) === 1;
    this.state = 'block';
    return headerBytes;
  }
}
