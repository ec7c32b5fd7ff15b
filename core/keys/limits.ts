import type { SvcConfig } from '../config/types';
import { invalidArgument, SvcError } from '../errors';
import { findModel } from '../models/catalog';

export { decodeNames, encodeNames } from '../auth/scope';

/** What a key may use besides its scope: null (or absent) is everything. */
export interface KeyLimits {
  readonly allowedModels?: readonly string[] | null;
  readonly allowedTools?: readonly string[] | null;
}

/** The models and tools keys may name: the running configuration's. */
export type KeyCatalog = Pick<SvcConfig, 'models' | 'tools'>;

const MAX_ENTRIES = 50;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}$/;

/**
 * A list of names as typed (`a,b` or an array): trimmed, empty entries dropped, duplicates kept
 * once. An empty list is null (every model or tool).
 */
export function splitNames(value: string | readonly string[]): string[] {
  const parts = typeof value === 'string' ? value.split(',') : value;
  return [...new Set(parts.map((p) => p.trim()).filter((p) => p !== ''))];
}

/**
 * The allowed models as stored: every name resolved to its model id (an alias names its model, so
 * the check at call time is on the id the call resolves to), or null for every model. An unknown
 * name is `invalid_argument` naming `param`, listing the configured ones.
 */
export function checkAllowedModels(
  names: readonly string[] | null | undefined,
  catalog: KeyCatalog | undefined,
  param = 'allowed_models',
): string[] | null {
  if (names === null || names === undefined) return null;
  const list = splitNames(names);
  if (list.length === 0) return null;
  if (list.length > MAX_ENTRIES) throw invalidArgument(param, `${param} may name at most ${MAX_ENTRIES} models`);
  const ids = new Set<string>();
  for (const name of list) {
    if (!NAME.test(name)) throw invalidArgument(param, `${param}: ${JSON.stringify(name)} is not a model name`);
    if (catalog === undefined) {
      ids.add(name);
      continue;
    }
    try {
      ids.add(findModel(catalog, name).id);
    } catch (error) {
      if (!(error instanceof SvcError) || error.code !== 'model_not_found') throw error;
      throw invalidArgument(
        param,
        `${param}: unknown model ${JSON.stringify(name)}; the models are ${[...catalog.models.keys()].join(', ')}`,
      );
    }
  }
  return [...ids];
}

/** As `checkAllowedModels`, for tools (names as MCP's tools/list gives them). */
export function checkAllowedTools(
  names: readonly string[] | null | undefined,
  catalog: KeyCatalog | undefined,
  param = 'allowed_tools',
): string[] | null {
  if (names === null || names === undefined) return null;
  const list = splitNames(names);
  if (list.length === 0) return null;
  if (list.length > MAX_ENTRIES) throw invalidArgument(param, `${param} may name at most ${MAX_ENTRIES} tools`);
  for (const name of list) {
    if (!NAME.test(name)) throw invalidArgument(param, `${param}: ${JSON.stringify(name)} is not a tool name`);
    if (catalog !== undefined && !catalog.tools.has(name)) {
      throw invalidArgument(
        param,
        `${param}: unknown tool ${JSON.stringify(name)}; the tools are ${[...catalog.tools.keys()].join(', ')}`,
      );
    }
  }
  return list;
}
