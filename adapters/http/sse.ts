import type { Context } from 'koa';
import { PassThrough } from 'node:stream';

/** A server-sent-events writer over a Koa response. */
export interface SseWriter {
  /** Writes one `data:` frame (objects are JSON-encoded). Returns false once the client is gone. */
  data(payload: unknown, event?: string): boolean;
  end(): void;
}

/** Switches the response to `text/event-stream` and returns its writer. Headers go out at once. */
export function openSse(ctx: Context): SseWriter {
  const stream = new PassThrough();
  ctx.status = 200;
  ctx.set('content-type', 'text/event-stream; charset=utf-8');
  ctx.set('cache-control', 'no-cache');
  ctx.set('connection', 'keep-alive');
  ctx.set('x-accel-buffering', 'no');
  ctx.body = stream;
  ctx.res.flushHeaders?.();
  let closed = false;
  ctx.res.once('close', () => (closed = true));
  return {
    data(payload, event) {
      if (closed) return false;
      const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
      stream.write(event === undefined ? `data: ${text}\n\n` : `event: ${event}\ndata: ${text}\n\n`);
      return true;
    },
    end() {
      stream.end();
    },
  };
}
