// Child processes of the bench: every server it measures, the fake upstream and the load clients
// run in processes of their own, so none shares an event loop with another, and each server's
// memory can be read from /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.join(__dirname, '../..');
export const TSX = require.resolve('tsx/cjs');

const live = new Set<ChildProcess>();

/** Kills (SIGKILL) every child still running that `track` was given, so none outlives the bench. */
export function killChildren(): void {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  live.clear();
}

/** Remembers `child` for killChildren until it exits. */
export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
}

export interface Child {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything it wrote so far (the last 64 KiB). */
  output(): string;
  /** SIGTERM, then waits for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Spawns `command args` and resolves once a line of its output matches `ready` (with the match),
 * or, without `ready`, once `port` accepts connections. Rejects with its output when it exits
 * first or is not ready within `timeoutMs`.
 */
export async function startChild(
  command: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; ready?: RegExp; port?: number; timeoutMs?: number },
): Promise<Child & { match: RegExpExecArray | null }> {
  const child = spawn(command, args, {
    env: { ...process.env, ...opts.env },
    cwd: opts.cwd ?? ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  let out = '';
  const keep = (chunk: Buffer): void => {
    out = (out + chunk.toString()).slice(-65_536);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const stop = (graceMs = 10_000): Promise<number | null> => {
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
    return new Promise((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve(code);
      });
      child.kill('SIGTERM');
    });
  };
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const match = await new Promise<RegExpExecArray | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${path.basename(args[args.length - 1] ?? command)} not ready after ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const done = (m: RegExpExecArray | null): void => {
      clearTimeout(timer);
      child.removeListener('exit', onExit);
      resolve(m);
    };
    const onExit = (code: number | null): void => {
      clearTimeout(timer);
      reject(new Error(`${[command, ...args].join(' ')} exited with ${String(code)} before it was ready:\n${out}`));
    };
    child.once('exit', onExit);
    if (opts.ready !== undefined) {
      const pattern = opts.ready;
      const look = (): void => {
        const m = pattern.exec(out);
        if (m !== null) {
          child.stdout?.removeListener('data', look);
          child.stderr?.removeListener('data', look);
          done(m);
        }
      };
      child.stdout?.on('data', look);
      child.stderr?.on('data', look);
    } else if (opts.port !== undefined) {
      const port = opts.port;
      const poll = (): void => {
        const socket = net.connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          done(null);
        });
        socket.once('error', () => {
          socket.destroy();
          if (child.exitCode === null) setTimeout(poll, 100);
        });
      };
      poll();
    } else done(null);
  });
  if (child.pid === undefined) throw new Error(`${command} has no pid`);
  return { child, pid: child.pid, match, output: () => out, stop };
}

/** Starts a bench/lib TypeScript entry in its own Node process, ready when it prints a URL. */
export async function startTsServer(file: string, args: readonly string[]): Promise<Child & { url: string }> {
  const started = await startChild(process.execPath, ['-r', TSX, path.join(ROOT, file), ...args], {
    ready: /^(http:\/\/\S+)$/m,
  });
  return { ...started, url: started.match?.[1] ?? '' };
}

/** Resident set size of a process in MiB (VmRSS in /proc/PID/status); null when unreadable. */
export function rssMiB(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) / 1024;
  } catch {
    return null;
  }
}

/** Samples the RSS of `pid` every `everyMs` until stopped; resolves the samples (MiB, in order). */
export function sampleRss(pid: number, everyMs: number): { stop(): number[] } {
  const sampler = sampleRssOf([pid], everyMs);
  return { stop: () => sampler.stop().map(([v]) => v ?? 0) };
}

/**
 * Samples the RSS of every process of `pids` together, every `everyMs` until stopped: each sample
 * one reading per process (MiB, in the order of `pids`), taken at the same moment, so that the
 * processes of one peer can be summed; a tick where one cannot be read is dropped.
 */
export function sampleRssOf(pids: readonly number[], everyMs: number): { stop(): number[][] } {
  const samples: number[][] = [];
  const take = (): void => {
    const values = pids.map(rssMiB);
    if (values.every((v): v is number => v !== null)) samples.push(values);
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
  };
}
