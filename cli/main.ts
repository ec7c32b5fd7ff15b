import type { Telemetry } from '../core';
import { UsageError, parseCommandArgs } from './args';
import { COMMANDS, commandHelp, globalHelp, usageLine, version, type Command } from './commands';
import { svcCommand } from './self';

export interface MainOptions {
  /** Started by cli/entry.ts for the server commands, before anything else is loaded. */
  readonly telemetry?: Telemetry | undefined;
  readonly env?: NodeJS.ProcessEnv;
  readonly stdout?: { write(text: string): unknown };
  readonly stderr?: { write(text: string): unknown };
}

const GROUPS = new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0] ?? ''));
const HELP = new Set(['-h', '--help', 'help']);

function groupHelp(group: string): string {
  const members = COMMANDS.filter((c) => c.name.startsWith(`${group} `));
  return [
    `Usage: svc ${group} COMMAND [options]`,
    '',
    ...members.map((c) => `  ${usageLine(c)}`),
    '',
    `Run "svc ${group} COMMAND --help" for details.`,
  ].join('\n');
}

type Resolved =
  { readonly command: Command; readonly rest: string[] } | { readonly help: string; readonly ok: boolean };

function resolve(argv: readonly string[]): Resolved {
  const [first, second] = argv;
  if (first === undefined) return { help: globalHelp(), ok: false };
  if (first === '--version' || first === '-V' || first === 'version') return { help: `svc ${version()}`, ok: true };
  if (HELP.has(first)) {
    // `svc help key create` is `svc key create --help`.
    return argv.length > 1 ? resolve([...argv.slice(1), '--help']) : { help: globalHelp(), ok: true };
  }
  if (GROUPS.has(first)) {
    if (second === undefined) return { help: groupHelp(first), ok: false };
    if (HELP.has(second)) return { help: groupHelp(first), ok: true };
    // Three words first (`price rate set`), then two.
    const third = argv[2];
    const longer = third === undefined ? undefined : COMMANDS.find((c) => c.name === `${first} ${second} ${third}`);
    if (longer !== undefined) return { command: longer, rest: argv.slice(3) };
    const command = COMMANDS.find((c) => c.name === `${first} ${second}`);
    if (command === undefined)
      throw new UsageError(`unknown command "${first} ${second}" (see: ${svcCommand()} ${first} --help)`);
    return { command, rest: argv.slice(2) };
  }
  const command = COMMANDS.find((c) => c.name === first);
  if (command === undefined) throw new UsageError(`unknown command "${first}" (see: ${svcCommand()} --help)`);
  return { command, rest: argv.slice(1) };
}

function describeError(error: unknown, verbose: boolean): string {
  if (!(error instanceof Error)) return String(error);
  // A configuration error's file, line number and line (ConfigError), below its one-line message.
  const where = (error as { where?: unknown }).where;
  if (!verbose) return typeof where === 'string' ? `${error.message}\n${where}` : error.message;
  const cause = error.cause instanceof Error ? `\ncaused by: ${error.cause.stack ?? error.cause.message}` : '';
  return `${error.stack ?? error.message}${cause}`;
}

/**
 * The `svc` command line (SPEC §3). Never throws and never calls `process.exit`: it sets
 * `process.exitCode` (0 done, 1 failed, 2 mistyped) and leaves nothing open, so the process ends
 * on its own once a command is done, and stays up while a server command runs.
 */
export async function main(argv: string[], options: MainOptions = {}): Promise<void> {
  process.exitCode = await run(argv, options);
}

/**
 * `main` without the process: runs one command with the given environment and output streams
 * and returns its exit status (0 done, 1 failed, 2 mistyped). Tests call it in process.
 */
export async function run(argv: readonly string[], options: MainOptions = {}): Promise<number> {
  const env = options.env ?? process.env;
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const { telemetry } = options;
  let serving = false;
  try {
    const resolved = resolve(argv);
    if ('help' in resolved) {
      (resolved.ok ? stdout : stderr).write(`${resolved.help}\n`);
      return resolved.ok ? 0 : 2;
    }
    const { command, rest } = resolved;
    const args = parseCommandArgs(command.name, rest, command.options, command.positionals);
    if (args.help) {
      stdout.write(`${commandHelp(command)}\n`);
      return 0;
    }
    serving = telemetry !== undefined;
    await command.run({
      args,
      env,
      json: args.flags.has('json'),
      telemetry,
      out: (text) => stdout.write(`${text}\n`),
      err: (text) => stderr.write(`${text}\n`),
    });
    return 0;
  } catch (error) {
    serving = false;
    const verbose = env['SVC_LOG_LEVEL'] === 'debug' || env['SVC_LOG_LEVEL'] === 'trace';
    stderr.write(`svc: ${describeError(error, verbose)}\n`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    // A server that started owns the telemetry from now on; otherwise flush it and let go.
    if (!serving) await telemetry?.shutdown().catch(() => undefined);
  }
}
