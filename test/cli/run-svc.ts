import { execFile } from 'node:child_process';
import { SVC_BIN } from '../helpers/processes';

export interface SvcRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `svc ARGS` to completion as a real child process (bin/svc.js on the sources) and returns
 * what it printed. A CLI that left a handle open would never exit and fail the test by timeout.
 */
export function runSvc(args: readonly string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [SVC_BIN, ...args],
      { env: { ...process.env, SVC_FROM_SOURCE: '1', ...env }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') {
          reject(error);
          return;
        }
        resolve({ code: child.exitCode, stdout, stderr });
      },
    );
  });
}

/** Runs a `--json` command that must succeed, and returns its one JSON object. */
export async function svcJson(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const run = await runSvc([...args, '--json'], env);
  if (run.code !== 0) throw new Error(`svc ${args.join(' ')} exited with ${String(run.code)}: ${run.stderr}`);
  const lines = run.stdout.split('\n').filter((line) => line !== '');
  if (lines.length !== 1)
    throw new Error(`svc ${args.join(' ')} printed ${lines.length} lines, not one JSON object:\n${run.stdout}`);
  const value: unknown = JSON.parse(lines[0] ?? '');
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`not a JSON object: ${run.stdout}`);
  return value as Record<string, unknown>;
}
