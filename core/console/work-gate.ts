import { SvcError } from '../errors';

export interface WorkGate {
  /** Runs `work` when a slot is free; waits in line, or throws `rate_limited` when the line is full. */
  run<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * Bounds how much expensive work (scrypt: 128 MiB and ~100 ms of a libuv thread each) runs at
 * once: `concurrency` at a time, up to `queue` more waiting their turn, the rest refused at once
 * so that a burst of sign-ins costs bounded memory instead of one hash per request.
 */
export function createWorkGate(options: { concurrency: number; queue: number }): WorkGate {
  let running = 0;
  const waiting: (() => void)[] = [];

  function release(): void {
    const next = waiting.shift();
    if (next === undefined) running--;
    else next();
  }

  return {
    async run(work) {
      if (running < options.concurrency) running++;
      else if (waiting.length < options.queue) await new Promise<void>((resolve) => waiting.push(resolve));
      else {
        throw new SvcError('rate_limited', 'The console is busy checking other sign-ins. Try again in a few seconds.', {
          details: { retry_after_seconds: 2 },
        });
      }
      try {
        return await work();
      } finally {
        release();
      }
    },
  };
}
