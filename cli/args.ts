import { parseArgs } from 'node:util';
import { svcCommand } from './self';

/** A mistake in how the command was typed: printed with a pointer to `--help`, exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  /** Shown in help, e.g. `ID`. */
  readonly placeholder?: string;
  readonly required?: boolean;
  readonly description: string;
}

export interface ParsedArgs {
  readonly strings: ReadonlyMap<string, string>;
  readonly flags: ReadonlySet<string>;
  readonly positionals: readonly string[];
  readonly help: boolean;
}

/**
 * Parses one command's arguments. Built on `node:util` parseArgs in token mode so that every
 * mistake gets a message of our own: `--amount -5` is a value (then rejected as an amount, not
 * as an "ambiguous option"), `--account --json` is a missing value, a repeated option is an
 * error rather than last-one-wins.
 */
export function parseCommandArgs(
  command: string,
  args: readonly string[],
  options: Readonly<Record<string, OptionSpec>>,
  positionalNames: readonly string[],
): ParsedArgs {
  const { tokens } = parseArgs({
    args: [...args],
    options: Object.fromEntries(Object.entries(options).map(([name, spec]) => [name, { type: spec.type }])),
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  // Only when there is a mistake to report: it loads the core to find the installation.
  const hint = (): string => `(see: ${svcCommand()} ${command} --help)`;
  const strings = new Map<string, string>();
  const flags = new Set<string>();
  const positionals: string[] = [];
  let help = false;

  for (const token of tokens) {
    if (token.kind === 'option-terminator') continue;
    if (token.kind === 'positional') {
      positionals.push(token.value);
      continue;
    }
    if (token.name === 'help' || token.rawName === '-h') {
      help = true;
      continue;
    }
    const spec = Object.prototype.hasOwnProperty.call(options, token.name) ? options[token.name] : undefined;
    if (spec === undefined) throw new UsageError(`unknown option ${token.rawName} for "svc ${command}" ${hint()}`);
    if (strings.has(token.name) || flags.has(token.name))
      throw new UsageError(`${token.rawName} is given more than once ${hint()}`);
    if (spec.type === 'boolean') {
      if (token.value !== undefined) throw new UsageError(`${token.rawName} takes no value ${hint()}`);
      flags.add(token.name);
      continue;
    }
    if (token.value === undefined || (!token.inlineValue && /^--?[A-Za-z]/.test(token.value))) {
      throw new UsageError(`${token.rawName} needs a value: ${token.rawName} ${spec.placeholder ?? 'VALUE'} ${hint()}`);
    }
    strings.set(token.name, token.value);
  }

  if (!help) {
    for (const [name, spec] of Object.entries(options)) {
      if (spec.required === true && !strings.has(name)) {
        throw new UsageError(`missing --${name} ${spec.placeholder ?? 'VALUE'} ${hint()}`);
      }
    }
    if (positionals.length > positionalNames.length) {
      const extra = positionals[positionalNames.length] ?? '';
      throw new UsageError(`unexpected argument ${JSON.stringify(extra)} for "svc ${command}" ${hint()}`);
    }
    const missing = positionalNames[positionals.length];
    if (missing !== undefined) throw new UsageError(`missing ${missing} ${hint()}`);
  }
  return { strings, flags, positionals, help };
}

/** A whole number of credits, written in plain decimal digits: `-5`, `1.5`, `1e3`, `abc` are refused. */
export function parseCredits(flag: string, text: string): bigint {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed)) {
    throw new UsageError(`${flag} must be a whole number of credits (toman), e.g. 1000 (got ${JSON.stringify(text)})`);
  }
  const value = BigInt(trimmed);
  if (value === 0n) throw new UsageError(`${flag} must be more than 0 (got ${JSON.stringify(text)})`);
  return value;
}

/** A positive integer within `max`, e.g. `--limit`. */
export function parseCount(flag: string, text: string, max: number): number {
  const trimmed = text.trim();
  const value = /^\d+$/.test(trimmed) ? Number(trimmed) : NaN;
  if (!Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new UsageError(`${flag} must be a whole number from 1 to ${max} (got ${JSON.stringify(text)})`);
  }
  return value;
}
