import { execFile } from 'node:child_process';
import { run } from '../../cli/main';
import { SVC_BIN } from '../helpers/processes';

export interface SvcRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

// Server commands stay real processes: they start listeners and own signals and telemetry.
const SERVER_COMMANDS = new Set(['serve', 'core', 'gateway']);

/**
 * Runs `svc ARGS` to completion and returns what it printed: in this process through the CLI's
 * injectable `run()` (same parsing, commands and output, none of tsx's start-up per command), or
 * as a real child process for the server commands.
 */
export function runSvc(args: readonly string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
  return SERVER_COMMANDS.has(args[0] ?? '') ? runSvcProcess(args, env) : runSvcInProcess(args, env);
}

/** `svc ARGS` through `run()` in this process, with `env` over this process's environment. */
export async function runSvcInProcess(args: readonly string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
  let stdout = '';
  let stderr = '';
  const code = await run([...args], {
    env: { ...process.env, ...env },
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}

/**
 * Runs `svc ARGS` to completion as a real child process (bin/svc.js on the sources) and returns
 * what it printed. A CLI that left a handle open would never exit and fail the test by timeout.
 */
export function runSvcProcess(args: readonly string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
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
