import type { Context } from 'koa';

/** A server-sent-events writer over a Koa response. */
export interface SseWriter {
  /** Writes one `data:` frame (objects are JSON-encoded). Returns false once the client is gone. */
  data(payload: unknown, event?: string): boolean;
  /** Writes one comment line (`: text`), which SSE clients skip. Returns false once the client is gone. */
  comment(text: string): boolean;
  end(): void;
}

/**
 * Switches the response to `text/event-stream` and returns its writer. Headers go out at once.
 * The writer owns the response from here (Koa does not send a body): frames go straight to the
 * socket, and the frames written in one turn of the event loop (a burst of upstream chunks that
 * arrived in one read) leave in one write.
 */
export function openSse(ctx: Context): SseWriter {
  ctx.status = 200;
  ctx.set('content-type', 'text/event-stream; charset=utf-8');
  ctx.set('cache-control', 'no-cache');
  ctx.set('connection', 'keep-alive');
  ctx.set('x-accel-buffering', 'no');
  ctx.respond = false;
  const res = ctx.res;
  res.flushHeaders();
  let closed = false;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    res.uncork();
  };
  res.once('close', () => (closed = true));
  const write = (frame: string): boolean => {
    if (closed || res.writableEnded) return false;
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
    res.write(frame);
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
    end() {
      if (!res.writableEnded) res.end();
    },
  };
}
