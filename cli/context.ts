import type { Telemetry } from '../core';
import type { ParsedArgs } from './args';

/** What a command gets: its parsed arguments, the environment, and where to write. */
export interface CommandContext {
  readonly args: ParsedArgs;
  readonly env: NodeJS.ProcessEnv;
  /** `--json` was given: print exactly one JSON object on stdout. */
  readonly json: boolean;
  /** Started by the entry point before anything else loads (server commands only). */
  readonly telemetry: Telemetry | undefined;
  out(text: string): void;
  err(text: string): void;
}
