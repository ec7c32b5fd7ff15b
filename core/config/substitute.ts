const REFERENCE = /\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The parsed file after `${NAME}` substitution, and which key paths came out of the environment. */
export interface Substituted {
  readonly value: unknown;
  /** Key paths whose string value contained a reference, so that e.g. `price: ${MAPS_PRICE}` may be read as an integer. */
  readonly fromEnv: ReadonlySet<string>;
}

export function childPath(parent: string, key: string | number): string {
  return parent === '' ? String(key) : `${parent}.${key}`;
}

/**
 * Replaces `${NAME}` in every string value (not in keys, not in comments) with the environment
 * variable NAME. Substituting after parsing means a secret full of `#`, `:` or quotes cannot
 * change the document's structure. An unset variable is an error naming it and the key.
 */
export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv): Substituted {
  const fromEnv = new Set<string>();

  function walk(node: unknown, path: string): unknown {
    if (typeof node === 'string') {
      if (!node.includes('${')) return node;
      fromEnv.add(path);
      return node.replace(REFERENCE, (_match, name: string) => {
        if (!NAME.test(name))
          throw new Error(`config ${path}: \${${name}} is not a valid environment variable reference`);
        const replacement = env[name];
        if (replacement === undefined) throw new Error(`config ${path}: environment variable ${name} is not set`);
        return replacement;
      });
    }
    if (Array.isArray(node)) return node.map((item, i) => walk(item, childPath(path, i)));
    if (isPlainObject(node)) {
      const out: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(node)) out[key] = walk(child, childPath(path, key));
      return out;
    }
    return node;
  }

  return { value: walk(value, ''), fromEnv };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype
  );
}
