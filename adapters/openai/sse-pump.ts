import type { Context } from 'koa';
import type { Logger } from 'pino';
import { openSse, type SseOptions, type SseWriter } from '../http/sse';
import { asSvcError } from './errors';
import type { SvcError } from '../../core/edge';

export interface PumpHandlers<T> {
  /** Writes the frames of one stream message; returns false once the client is gone. */
  write(sse: SseWriter, item: T): boolean;
  /** The last frames of a stream that ended normally (e.g. `[DONE]`). */
  end(sse: SseWriter): void;
  /** The format's own error frame, for a failure after the stream started. */
  error(sse: SseWriter, error: SvcError): void;
}

/**
 * Streams `source` as SSE. The first message is awaited before any header goes out, so a
 * refusal (bad key, no credit, unknown model, upstream down) is an ordinary JSON error
 * response; once the stream has started, failures become the format's error frame. The rest
 * of the stream is written in the background (the SSE writer owns the response), so the
 * middleware returns at once.
 */
export async function pumpSse<T>(
  ctx: Context,
  source: AsyncIterable<T>,
  handlers: PumpHandlers<T>,
  logger: Logger,
  options: SseOptions = {},
): Promise<void> {
  const iterator = source[Symbol.asyncIterator]();
  const first = await iterator.next();
  const sse = openSse(ctx, options);
  const run = async (): Promise<void> => {
    try {
      for (let next = first; next.done !== true; next = await iterator.next()) {
        // A client that does not keep up is waited for (nothing more is pulled from the core
        // meanwhile); one that left or stayed blocked too long ends the call, which the core
        // settles at what was produced.
        const ready = handlers.write(sse, next.value) ? sse.ready() : false;
        if (ready !== true && !(await ready)) {
          await iterator.return?.(undefined);
          return;
        }
      }
      handlers.end(sse);
    } catch (error) {
      const svc = asSvcError(error);
      if (svc.code !== 'cancelled') {
        logger.warn({ err: error, requestId: ctx.state['requestId'] as unknown }, 'stream failed after it started');
        handlers.error(sse, svc);
      }
    } finally {
      sse.end();
    }
  };
  void run();
}
