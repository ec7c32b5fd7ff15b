import fs from 'node:fs';
import { isMap, isSeq, LineCounter, parseDocument, type Document, type ScalarTag } from 'yaml';
import { builtInModels, builtInTools, DEFAULT_LIMITS } from './defaults';
import { describe, Fraction, isPlainObject, issueAt, keyPath } from './fields';
import { configFile } from './schema';
import { substituteEnv } from './substitute';
import type { SvcConfig } from './types';

/**
 * Loads and validates the configuration file of SPEC §4, or returns the built-in sandbox
 * configuration when `path` is undefined.
 *
 * - `${NAME}` in any string value is replaced by `env.NAME`; an unset variable is an error.
 * - Every error is an `Error` whose message starts with `config <key path>:` (or `config file
 *   <path>:` for the file itself); a value from the environment is never shown in it.
 * - What the file may hold, and what it becomes, is the zod schema of `schema.ts`.
 */
export function loadConfig(path: string | undefined, env: NodeJS.ProcessEnv): SvcConfig {
  if (path === undefined) {
    return { models: builtInModels(), tools: builtInTools(), limits: DEFAULT_LIMITS, source: 'built-in' };
  }
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new Error(`config file ${path}: cannot be read${typeof code === 'string' ? ` (${code})` : ''}`, {
      cause: error,
    });
  }
  return parseConfig(text, env, path);
}

/**
 * A configuration file that cannot be used. The message is one line naming the key path; `where`
 * adds the file, the line number and the line itself (with a caret), for the CLI to print below it.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    message: string,
    readonly where: string,
  ) {
    super(message);
  }
}

/** `  in FILE, line N:` and the line, with a caret under column `col` when given. */
function excerpt(source: string, text: string, line: number, col?: number): string {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  const show = (n: number): string => `${String(n).padStart(5)} | ${lines[n - 1] ?? ''}`;
  const caret = col === undefined ? [] : [`${' '.repeat(8 + col - 1)}^`];
  // An error at a blank line (often the end of the file) is about the line before it.
  const before = line > 1 && (lines[line - 1] ?? '').trim() === '' ? [show(line - 1)] : [];
  return [`  in ${source}, line ${line}:`, ...before, show(line), ...caret].join('\n');
}

/** The line (1-based) of the key at `path` in the document (its last segment's key), if found. */
function lineOfKey(doc: Document, counter: LineCounter, path: readonly PropertyKey[]): number | undefined {
  let node: unknown = doc.contents;
  let offset: number | undefined;
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => String((p.key as { value?: unknown } | null)?.value ?? p.key) === String(segment),
      );
      if (pair === undefined) break;
      offset = (pair.key as { range?: [number, number, number] } | null)?.range?.[0] ?? offset;
      node = pair.value;
    } else if (isSeq(node)) {
      const item = node.items[Number(segment)] as { range?: [number, number, number] } | undefined;
      if (item === undefined) break;
      offset = item.range?.[0] ?? offset;
      node = item;
    } else break;
  }
  return offset === undefined ? undefined : counter.linePos(offset).line;
}

/** Validates configuration text (YAML); `source` names it in the result and in syntax errors. */
export function parseConfig(text: string, env: NodeJS.ProcessEnv, source: string): SvcConfig {
  const counter = new LineCounter();
  const doc = parseDocument(text, {
    intAsBigInt: true,
    prettyErrors: false,
    lineCounter: counter,
    // Fractions keep their text (SPEC §15: dollar prices and margins are exact decimals).
    customTags: (tags) =>
      tags.map((tag) =>
        typeof tag === 'object' && tag.tag === 'tag:yaml.org,2002:float' && !('collection' in tag && tag.collection)
          ? ({ ...tag, resolve: (source: string) => new Fraction(source) } as ScalarTag)
          : tag,
      ),
  });
  const syntax = doc.errors[0];
  if (syntax !== undefined) {
    const where = syntax.linePos?.[0] ?? counter.linePos(syntax.pos[0]);
    // The usual cause (SPEC §4): `${NAME}` unquoted inside a flow mapping or list, `{ a: ${A} }`.
    const line = text.split('\n')[where.line - 1] ?? '';
    const hint = /[{[][^{}[\]]*\$\{/.test(line)
      ? ' (an unquoted ${NAME} inside { … } or [ … ] is not valid YAML: quote it, "${NAME}", or write that mapping in block style)'
      : '';
    // yaml's own message repeats the position and ends on ":" before an excerpt of its own.
    const words = (syntax.message.split('\n', 1)[0] ?? '').replace(/ at line \d+, column \d+:?$/, '').replace(/:$/, '');
    throw new ConfigError(
      `config file ${source}: invalid YAML at line ${where.line}, column ${where.col}: ${words}${hint}`,
      excerpt(source, text, where.line, where.col),
    );
  }
  const parsed: unknown = doc.toJS({ maxAliasCount: 100 });
  if (parsed === null || parsed === undefined) {
    return { models: builtInModels(), tools: builtInTools(), limits: DEFAULT_LIMITS, source };
  }
  const value = substituteEnv(parsed, env);
  if (!isPlainObject(value)) {
    throw new Error(
      `config file ${source}: the top level must be a mapping with models, tools and limits (got ${describe(value)})`,
    );
  }
  const result = configFile.safeParse(value);
  if (!result.success) {
    const first = result.error.issues[0];
    const { path, message } = first === undefined ? { path: [], message: 'is invalid' } : issueAt(first);
    const line = lineOfKey(doc, counter, path);
    throw new ConfigError(
      `config ${keyPath(path)}: ${message}`,
      line === undefined ? `  in ${source}` : excerpt(source, text, line),
    );
  }
  return { ...result.data, source };
}
