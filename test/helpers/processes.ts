import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

export const SVC_BIN = path.join(__dirname, '..', '..', 'bin', 'svc.js');

// Ports this process handed out: the kernel may give a just-released port again at once, and two
// calls in a row (an HTTP and a gRPC address for one svc) must not get the same one.
const handedOut = new Set<number>();

/** A free TCP port on 127.0.0.1 (bound, then released), never one this process handed out before. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await anyFreePort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface SvcProcess {
  readonly child: ChildProcess;
  /** Everything the process wrote so far. */
  output(): string;
  /** SIGTERM, then waits for exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Spawns `node NODE_ARGS svc ARGS` (from the sources) and resolves once `readyText` appears in its output.
 * Rejects with the output when it exits first.
 */
export async function spawnSvc(
  args: string[],
  env: NodeJS.ProcessEnv,
  readyText: string | RegExp,
  timeoutMs = 60_000,
  nodeArgs: readonly string[] = [],
): Promise<SvcProcess> {
  const child = spawn(process.execPath, [...nodeArgs, SVC_BIN, ...args], {
    env: { ...process.env, SVC_FROM_SOURCE: '1', SVC_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const proc: SvcProcess = {
    child,
    output: () => out,
    stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((resolve) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        child.once('exit', (code) => {
          clearTimeout(timer);
          resolve(code);
        });
        child.kill('SIGTERM');
      });
    },
  };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} not ready after ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString();
      if (typeof readyText === 'string' ? out.includes(readyText) : readyText.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`svc ${args.join(' ')} exited with ${String(code)} before it was ready:\n${out}`));
    });
  });
  return proc;
}
