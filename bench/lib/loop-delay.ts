// The event loop's delay inside a server the bench runs, read through ./loop-probe.cjs (preloaded
// with `-r`): `loopProbe(dir)` is what the server is started with; `startLoopDelay(pid, dir)` starts
// the recording and `stop()` resolves the histogram over that window (null when the probe did not
// answer: the number is then missing, not made up). Each value is Node's measure: the time between
// two ticks of a 1 ms timer, so an idle loop reads about 1 ms and a loop blocked 30 ms about 30.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './children';

export const LOOP_PROBE = path.join(ROOT, 'bench/lib/loop-probe.cjs');

export interface LoopDelay {
  /** Ticks recorded (about one per ms of the window). */
  readonly count: number;
  readonly meanMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

interface Answer extends Partial<LoopDelay> {
  readonly seq: number;
  readonly state: 'recording' | 'stopped';
}

/** The node arguments and environment that preload the probe, answering into `dir`. */
export function loopProbe(dir: string): { nodeArgs: string[]; env: NodeJS.ProcessEnv } {
  return { nodeArgs: ['-r', LOOP_PROBE], env: { SVC_LOOP_PROBE_DIR: dir } };
}

function read(file: string): Answer | null {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as Answer;
  } catch {
    return null;
  }
}

/** Signals the probe of `pid` and waits (up to `timeoutMs`) for its answer to that signal. */
async function ask(pid: number, dir: string, timeoutMs: number): Promise<Answer | null> {
  const file = path.join(dir, `loop-${pid}.json`);
  const last = read(file)?.seq ?? 0;
  try {
    process.kill(pid, 'SIGWINCH');
  } catch {
    return null;
  }
  const until = Date.now() + timeoutMs;
  for (;;) {
    const answer = read(file);
    if (answer !== null && answer.seq > last) return answer;
    if (Date.now() > until) return null;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Starts recording the loop delay of `pid` (whose probe answers into `dir`); `stop()` ends it and
 * resolves the histogram, or null when the probe is not there or did not answer in time.
 */
export async function startLoopDelay(
  pid: number,
  dir: string,
  timeoutMs = 5_000,
): Promise<{ stop(): Promise<LoopDelay | null> }> {
  let started = await ask(pid, dir, timeoutMs);
  // A probe still recording from a window whose stop went unanswered: that signal stopped it.
  if (started?.state === 'stopped') started = await ask(pid, dir, timeoutMs);
  if (started?.state !== 'recording') return { stop: () => Promise.resolve(null) };
  return {
    async stop() {
      const r = await ask(pid, dir, timeoutMs);
      if (r?.state !== 'stopped' || r.count === undefined) return null;
      return { count: r.count, meanMs: r.meanMs ?? 0, p50Ms: r.p50Ms ?? 0, p99Ms: r.p99Ms ?? 0, maxMs: r.maxMs ?? 0 };
    },
  };
}
