import { Worker } from 'node:worker_threads';

/*
 * Large token counts off the event loop (issue 31). cl100k_base costs about 1 µs of CPU per byte
 * (more on long runs of letters): a 900 kB body counted on the core's event loop held every other
 * caller's request for a second. Texts above INLINE_COUNT_BYTES are counted on one worker thread
 * instead, shared by every core in the process, started on first use and never keeping the process
 * alive. Counts queue there in order; nothing else waits for them. Callers bound what they send
 * (TOKENIZE_MAX_BYTES per request, see tokens.ts), so the queue is bounded by the requests
 * in flight, which the request rate limit bounds.
 */

/** Texts up to this size are counted on the calling thread (a few milliseconds at most). */
export const INLINE_COUNT_BYTES = 8 * 1024;

// Evaluated code, so that it runs the same from dist/ and from the TypeScript sources (with tsx's
// loader, as cli/compose.ts starts the core thread).
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
if (workerData.loader) require(workerData.loader);
const { countTokensLinear } = require(workerData.tokens);
parentPort.on('message', (m) => {
  try {
    parentPort.postMessage({ id: m.id, count: countTokensLinear(m.text, m.stopAbove, m.perSlice) });
  } catch (error) {
    parentPort.postMessage({ id: m.id, error: String((error && error.message) || error) });
  }
});
`;

interface Pending {
  resolve(count: number): void;
  reject(error: Error): void;
}

let worker: Worker | undefined;
let countedBytes = 0;

/**
 * UTF-8 bytes of text handed to the tokenizer in this process since it started (on this thread
 * or the worker): what tests read to tell that a refused call counted nothing.
 */
export function tokenizedBytes(): number {
  return countedBytes;
}

/** Adds to `tokenizedBytes` (tokens.ts calls it for each text it counts on this thread). */
export function noteTokenized(bytes: number): void {
  countedBytes += bytes;
}
const pending = new Map<number, Pending>();
let nextId = 0;

function failAll(error: Error): void {
  for (const p of pending.values()) p.reject(error);
  pending.clear();
  worker = undefined;
}

function start(): Worker {
  const fromSource = __filename.endsWith('.ts');
  const w = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      tokens: require.resolve(fromSource ? './tokens.ts' : './tokens.js'),
      loader: fromSource ? require.resolve('tsx/cjs') : undefined,
    },
  });
  w.unref();
  w.on('message', (m: { id: number; count?: number; error?: string }) => {
    const p = pending.get(m.id);
    if (p === undefined) return;
    pending.delete(m.id);
    if (pending.size === 0) w.unref();
    if (m.error !== undefined || m.count === undefined) p.reject(new Error(`token count failed: ${m.error ?? ''}`));
    else p.resolve(m.count);
  });
  w.on('error', (error) => failAll(error));
  w.on('exit', (code) => failAll(new Error(`the token counting thread exited (${code})`)));
  return w;
}

/** `countTokensLinear(text, stopAbove, perSlice)` on the token worker. */
export function countInWorker(text: string, stopAbove = Number.POSITIVE_INFINITY, perSlice = 0): Promise<number> {
  countedBytes += Buffer.byteLength(text, 'utf8');
  worker ??= start();
  const w = worker;
  const id = nextId++;
  return new Promise<number>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    // Referenced while a count is pending, so a caller awaiting it is not left hanging at exit.
    w.ref();
    w.postMessage({ id, text, stopAbove, perSlice });
  });
}
