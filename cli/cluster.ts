/*
 * `svc serve --workers N`: N processes serving one HTTP port (node:cluster; the primary accepts
 * the connections and hands them round-robin to the workers). Each worker is the one-process
 * `svc serve` (its own core, in process, and its own gateway) on one shared database; the primary
 * does what must happen once (cli/compose.ts `runServePrimary`: the migration before any worker
 * starts, SQLite's WAL checkpoints, SVC_METRICS_ADDR and OTLP with every worker's metrics added
 * up, the ready line) and supervises: a worker that dies is logged and replaced, and SIGTERM
 * drains every worker before the primary exits. This file is the supervision and the messages
 * between the primary and its workers; what each process builds is in cli/compose.ts.
 */
import cluster, { type Worker } from 'node:cluster';
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';
import { mergeSnapshots, type FamilySnapshot } from '../core/primary';

/** Set by the primary in each worker's environment: its number, 1..N, kept by a replacement. */
const INDEX_VARIABLE = 'SVC_WORKER_INDEX';
const TOTAL_VARIABLE = 'SVC_WORKER_TOTAL';

/** How long the primary waits for a stopping worker before it kills it. */
const STOP_GRACE_MS = 30_000;
/** More restarts than this within RESTART_WINDOW_MS: something is wrong with every worker; stop. */
const MAX_RESTARTS = 10;
const RESTART_WINDOW_MS = 60_000;

/** The CPU quota of the cgroup (v2 `cpu.max` or v1 `cpu.cfs_quota_us`) at `dir`, in CPUs; undefined: none. */
function cgroupQuota(dir: string, read: (file: string) => string): number | undefined {
  try {
    const [max, period] = read(`${dir}/cpu.max`).trim().split(/\s+/);
    if (max === 'max') return undefined;
    const cpus = Number(max) / Number(period);
    return cpus > 0 ? cpus : undefined;
  } catch {
    // Not cgroup v2 here: try v1.
  }
  try {
    const quota = Number(read(`${dir}/cpu.cfs_quota_us`).trim());
    const period = Number(read(`${dir}/cpu.cfs_period_us`).trim());
    return quota > 0 && period > 0 ? quota / period : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The CPUs this process may use: `os.availableParallelism()` (the CPU affinity mask), capped by
 * the CPU quota of its cgroup and every parent cgroup (a container's `--cpus`, a Kubernetes CPU
 * limit), rounded up: a quota of 1.5 CPUs gets 2 workers.
 */
export function usableCpus(read: (file: string) => string = (file) => fs.readFileSync(file, 'utf8')): number {
  let cpus = os.availableParallelism();
  const dirs = new Set<string>(['/sys/fs/cgroup', '/sys/fs/cgroup/cpu']);
  try {
    // cgroup v2: "0::/PATH"; v1: "N:cpu,cpuacct:/PATH".
    for (const line of read('/proc/self/cgroup').split('\n')) {
      const [, controllers, where] = line.split(':');
      if (where === undefined || where === '/') continue;
      const base =
        controllers === ''
          ? '/sys/fs/cgroup'
          : controllers?.split(',').includes('cpu')
            ? '/sys/fs/cgroup/cpu'
            : undefined;
      if (base === undefined) continue;
      for (let dir = where; dir !== '/' && dir !== ''; dir = dir.slice(0, dir.lastIndexOf('/')) || '/')
        dirs.add(base + dir);
    }
  } catch {
    // No /proc: the affinity mask alone.
  }
  for (const dir of dirs) {
    const quota = cgroupQuota(dir, read);
    if (quota !== undefined) cpus = Math.min(cpus, Math.max(1, Math.ceil(quota)));
  }
  return Math.max(1, cpus);
}

/** Whether this process is a worker of `svc serve --workers N`, and which. */
export function clusterWorker(env: NodeJS.ProcessEnv): { readonly index: number; readonly total: number } | undefined {
  if (!cluster.isWorker) return undefined;
  const index = Number(env[INDEX_VARIABLE]);
  const total = Number(env[TOTAL_VARIABLE]);
  return index >= 1 && total >= 1 ? { index, total } : undefined;
}

/** Messages between the primary and a worker (structured clone: bigint counters cross intact). */
type ToWorker =
  | { readonly svc: 'metrics'; readonly id: number }
  | { readonly svc: 'all-metrics'; readonly id: number; readonly families: FamilySnapshot[] }
  | { readonly svc: 'stop' };
type FromWorker =
  | { readonly svc: 'ready'; readonly url: string }
  | { readonly svc: 'metrics'; readonly id: number; readonly families: FamilySnapshot[] }
  | { readonly svc: 'all-metrics'; readonly id: number };

function isMessage(message: unknown): message is { svc: string } {
  return typeof message === 'object' && message !== null && typeof (message as { svc?: unknown }).svc === 'string';
}

/** The workers, as the primary sees them once every one was ready. */
export interface Workers {
  /** The HTTP address they all serve. */
  readonly url: string;
  readonly pids: () => number[];
  /** Every worker's metrics added up (`mergeSnapshots`); a worker that does not answer in 5 s is left out. */
  snapshot(): Promise<FamilySnapshot[]>;
  /** Drains every worker (each stops as one `svc serve` does on SIGTERM); true when all exited 0. */
  stop(): Promise<boolean>;
}

/**
 * Forks `count` workers (this program, same arguments) and resolves once every one is ready.
 * A worker that fails before it is ready fails the start (the others are stopped); one that dies
 * later is logged and replaced under the same number.
 */
export function startWorkers(count: number, logger: Logger): Promise<Workers> {
  // Structured clone, not JSON: the metrics' counters are bigint.
  cluster.setupPrimary({ serialization: 'advanced' });
  const slots = new Map<number, Worker>();
  const pending = new Map<number, { answers: FamilySnapshot[][]; waiting: number; done: () => void }>();
  let nextId = 0;
  let stopping: Promise<boolean> | undefined;
  let allReady = false;
  let url = '';
  const restarts: number[] = [];
  let failStart: (error: Error) => void = () => undefined;
  let finishStart: () => void = () => undefined;
  let clean = true;

  function snapshot(): Promise<FamilySnapshot[]> {
    const live = [...slots.values()].filter((w) => w.isConnected());
    if (live.length === 0) return Promise.resolve([]);
    const id = nextId++;
    return new Promise<FamilySnapshot[]>((resolve) => {
      const entry = { answers: [] as FamilySnapshot[][], waiting: live.length, done: () => undefined as void };
      const timer = setTimeout(() => entry.done(), 5000);
      timer.unref();
      entry.done = () => {
        clearTimeout(timer);
        pending.delete(id);
        resolve(mergeSnapshots(entry.answers));
      };
      pending.set(id, entry);
      for (const w of live) send(w, { svc: 'metrics', id });
    });
  }

  function send(worker: Worker, message: ToWorker): void {
    if (!worker.isConnected()) return;
    try {
      worker.send(message);
    } catch {
      // Gone between the check and the send: its exit is handled on its own.
    }
  }

  function fork(index: number): void {
    const worker = cluster.fork({ [INDEX_VARIABLE]: String(index), [TOTAL_VARIABLE]: String(count) });
    slots.set(index, worker);
    let ready = false;
    worker.on('message', (message: unknown) => {
      if (!isMessage(message)) return;
      const m = message as FromWorker;
      if (m.svc === 'ready') {
        ready = true;
        url = m.url;
        if (allReady) logger.info({ worker: index, pid: worker.process.pid }, 'worker replaced');
        else if ([...slots.keys()].length === count && readyCount() === count) finishStart();
      } else if (m.svc === 'metrics') {
        const entry = pending.get(m.id);
        if (entry !== undefined) {
          entry.answers.push(m.families);
          entry.waiting -= 1;
          if (entry.waiting === 0) entry.done();
        }
      } else if (m.svc === 'all-metrics') {
        void snapshot().then((families) => send(worker, { svc: 'all-metrics', id: m.id, families }));
      }
    });
    readiness.set(worker, () => ready);
    worker.on('exit', (code, signal) => {
      if (slots.get(index) === worker) slots.delete(index);
      if (stopping !== undefined) {
        if (code !== 0) clean = false;
        return;
      }
      if (!allReady) {
        failStart(new Error(`worker ${index} exited (${signal ?? code}) before it was ready`));
        return;
      }
      const now = Date.now();
      while (restarts.length > 0 && (restarts[0] ?? 0) < now - RESTART_WINDOW_MS) restarts.shift();
      if (restarts.length >= MAX_RESTARTS) {
        logger.fatal(
          { worker: index, pid: worker.process.pid, code, signal, restarts: restarts.length },
          'worker exited; too many restarts in a minute, stopping',
        );
        process.exitCode = 1;
        process.kill(process.pid, 'SIGTERM');
        return;
      }
      restarts.push(now);
      logger.error(
        { worker: index, pid: worker.process.pid, code, signal, ready },
        'worker exited unexpectedly; starting another',
      );
      fork(index);
    });
  }

  const readiness = new WeakMap<Worker, () => boolean>();
  const readyCount = (): number => [...slots.values()].filter((w) => readiness.get(w)?.() === true).length;

  function stop(): Promise<boolean> {
    stopping ??= Promise.all(
      [...slots.values()].map(
        (worker) =>
          new Promise<void>((resolve) => {
            if (worker.process.exitCode !== null || worker.process.signalCode !== null) {
              resolve();
              return;
            }
            const timer = setTimeout(() => {
              logger.warn({ pid: worker.process.pid }, 'worker still running after the stop deadline; killing it');
              worker.process.kill('SIGKILL');
            }, STOP_GRACE_MS);
            worker.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            send(worker, { svc: 'stop' });
          }),
      ),
    ).then(() => clean);
    return stopping;
  }

  return new Promise<Workers>((resolve, reject) => {
    failStart = (error) => {
      failStart = () => undefined;
      void stop().then(() => reject(error));
    };
    finishStart = () => {
      allReady = true;
      resolve({ url, pids: () => [...slots.values()].map((w) => w.process.pid ?? 0), snapshot, stop });
    };
    for (let index = 1; index <= count; index += 1) fork(index);
  });
}

/** A worker's side of the messages: tell the primary it is ready, answer metrics, stop on request. */
export interface WorkerSide {
  /** Every worker's metrics added up, from the primary (for the gateway's `GET /metrics`). */
  allMetrics(): Promise<FamilySnapshot[]>;
  ready(url: string): void;
  /** Ends the channel to the primary, so that this process can exit once it has stopped. */
  leave(): void;
}

export function workerSide(own: () => Promise<FamilySnapshot[]>, onStop: () => void): WorkerSide {
  const pending = new Map<number, (families: FamilySnapshot[]) => void>();
  let nextId = 0;
  const send = (message: FromWorker): void => {
    if (process.connected) process.send?.(message);
  };
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    const m = message as ToWorker;
    if (m.svc === 'metrics') void own().then((families) => send({ svc: 'metrics', id: m.id, families }));
    else if (m.svc === 'all-metrics') {
      pending.get(m.id)?.(m.families);
      pending.delete(m.id);
    } else if (m.svc === 'stop') onStop();
  });
  return {
    allMetrics: () =>
      new Promise<FamilySnapshot[]>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('the primary did not send the metrics'));
        }, 10_000);
        pending.set(id, (families) => {
          clearTimeout(timer);
          resolve(families);
        });
        send({ svc: 'all-metrics', id });
      }),
    ready: (url) => send({ svc: 'ready', url }),
    leave: () => cluster.worker?.disconnect(),
  };
}
