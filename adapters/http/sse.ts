import type { Context } from 'koa';

/** A server-sent-events writer over a Koa response. */
export interface SseWriter {
  /** Writes one `data:` frame (objects are JSON-encoded). Returns false once the client is gone. */
  data(payload: unknown, event?: string): boolean;
  /**
   * Whether more may be written: `true` at once while the client keeps up; otherwise a promise
   * that settles when its socket drained (`true`) or it is gone (`false`). A client that stays
   * blocked for the stall timeout is cut (the promise gives `false`).
   */
  ready(): true | Promise<boolean>;
  /** Writes one comment line (`: text`), which SSE clients skip. Returns false once the client is gone. */
  comment(text: string): boolean;
  /** Writes `text` as it is (a framing of the caller's own, e.g. Gemini's CRLF frames or a streamed JSON array). */
  raw(text: string): boolean;
  end(): void;
}

export interface SseOptions {
  /** Bytes buffered for a slow client before the writer waits for it to read (default 256 KiB). */
  readonly highWaterBytes?: number | undefined;
  /** How long a client may leave that buffer full before the stream is cut (default 60 s). */
  readonly stallMs?: number | undefined;
  /** The response's content type (default `text/event-stream; charset=utf-8`). */
  readonly contentType?: string | undefined;
}

export const DEFAULT_SSE_HIGH_WATER_BYTES = 256 * 1024;
export const DEFAULT_SSE_STALL_MS = 60_000;

/**
 * Switches the response to `text/event-stream` and returns its writer. Headers go out within this
 * turn of the event loop, with the first frames. The writer owns the response from here (Koa does
 * not send a body): the frames written in one turn of the event loop (a burst of upstream chunks
 * that arrived in one read) are joined into one string and leave in one write, the first of them
 * together with the headers, the last together with the end of the response. The writer honours
 * back-pressure: a client that stops reading holds at most about `highWaterBytes` here (the caller
 * waits on `ready()`, which stops pulling from the core, whose gRPC flow control stops the
 * upstream), and one that stays blocked for `stallMs` is disconnected, which cancels the call like
 * any client that left.
 */
export function openSse(ctx: Context, options: SseOptions = {}): SseWriter {
  const highWater = options.highWaterBytes ?? DEFAULT_SSE_HIGH_WATER_BYTES;
  const stallMs = options.stallMs ?? DEFAULT_SSE_STALL_MS;
  ctx.status = 200;
  ctx.set('content-type', options.contentType ?? 'text/event-stream; charset=utf-8');
  ctx.set('cache-control', 'no-cache');
  ctx.set('connection', 'keep-alive');
  ctx.set('x-accel-buffering', 'no');
  ctx.respond = false;
  const res = ctx.res;
  let closed = false;
  // Frames written since the last flush; one `res.write` per turn of the event loop sends them.
  let pending = '';
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (closed || res.writableEnded) {
      pending = '';
      return;
    }
    if (pending === '') {
      if (!res.headersSent) res.flushHeaders();
      return;
    }
    const text = pending;
    pending = '';
    res.write(text);
  };
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    process.nextTick(flush);
  };
  res.once('close', () => (closed = true));
  // The headers leave in this turn even when no frame follows them.
  schedule();
  const write = (frame: string): boolean => {
    if (closed || res.writableEnded) return false;
    pending += frame;
    schedule();
    return true;
  };
  return {
    data(payload, event) {
      const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
      return write(event === undefined ? `data: ${text}\n\n` : `event: ${event}\ndata: ${text}\n\n`);
    },
    comment(text) {
      return write(`: ${text.replace(/[\r\n]+/g, ' ')}\n\n`);
    },
    raw: write,
    ready() {
      if (closed || res.destroyed) return Promise.resolve(false);
      if (res.writableLength + pending.length < highWater) return true;
      // What this turn wrote goes to the socket first, so that its drain is what is waited for.
      flush();
      if (res.writableLength < highWater) return true;
      return new Promise<boolean>((resolve) => {
        const done = (ok: boolean): void => {
          clearTimeout(timer);
          res.off('drain', onDrain);
          res.off('close', onClose);
          resolve(ok);
        };
        const onDrain = (): void => done(true);
        const onClose = (): void => done(false);
        const timer = setTimeout(() => {
          // Blocked too long: drop the connection and everything buffered for it.
          res.destroy();
          done(false);
        }, stallMs);
        res.on('drain', onDrain);
        res.on('close', onClose);
      });
    },
    end() {
      if (res.writableEnded) return;
      const text = pending;
      pending = '';
      if (closed || text === '') res.end();
      else res.end(text);
    },
  };
}
