import fs from 'node:fs';
import { parseDocument } from 'yaml';
import { builtInModels, builtInTools, DEFAULT_LIMITS } from './defaults';
import { describe, isPlainObject, issueAt, keyPath } from './fields';
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

/** Validates configuration text (YAML); `source` names it in the result and in syntax errors. */
export function parseConfig(text: string, env: NodeJS.ProcessEnv, source: string): SvcConfig {
  const doc = parseDocument(text, { intAsBigInt: true, prettyErrors: true });
  const syntax = doc.errors[0];
  if (syntax !== undefined) {
    const where = syntax.linePos?.[0];
    const at = where === undefined ? '' : ` at line ${where.line}, column ${where.col}`;
    // The usual cause (SPEC §4): `${NAME}` unquoted inside a flow mapping or list, `{ a: ${A} }`.
    const line = where === undefined ? '' : (text.split('\n')[where.line - 1] ?? '');
    const hint = /[{[][^{}[\]]*\$\{/.test(line)
      ? ' (an unquoted ${NAME} inside { … } or [ … ] is not valid YAML: quote it, "${NAME}", or write that mapping in block style)'
      : '';
    throw new Error(`config file ${source}: invalid YAML${at}: ${syntax.message.split('\n', 1)[0] ?? ''}${hint}`);
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
    throw new Error(`config ${keyPath(path)}: ${message}`);
  }
  return { ...result.data, source };
}
