import { EnvText, isPlainObject } from './fields';

const REFERENCE = /\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function childPath(parent: string, key: string | number): string {
  return parent === '' ? String(key) : `${parent}.${key}`;
}

/**
 * Prepares the parsed file for the schema:
 * - replaces `${NAME}` in every string value (not in keys, not in comments) with the environment
 *   variable NAME, and wraps the result in `EnvText` so that no error ever shows it (and so that
 *   `price: ${MAPS_PRICE}` may be read as an integer). Substituting after parsing means a secret
 *   full of `#`, `:` or quotes cannot change the document's structure. An unset variable is an
 *   error naming it and the key;
 * - leaves out keys without a value (`key:` alone is YAML's null): an empty key is an absent one.
 */
export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv): unknown {
  function walk(node: unknown, path: string): unknown {
    if (typeof node === 'string') {
      if (!node.includes('${')) return node;
      return new EnvText(
        node.replace(REFERENCE, (_match, name: string) => {
          if (!NAME.test(name))
            throw new Error(`config ${path}: \${${name}} is not a valid environment variable reference`);
          const replacement = env[name];
          if (replacement === undefined) throw new Error(`config ${path}: environment variable ${name} is not set`);
          return replacement;
        }),
      );
    }
    if (Array.isArray(node)) return node.map((item, i) => walk(item, childPath(path, i)));
    if (isPlainObject(node)) {
      const out: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(node)) {
        if (child === null || child === undefined) continue;
        // defineProperty: a key named `__proto__` stays a key (and an unknown one) instead of a prototype.
        Object.defineProperty(out, key, {
          value: walk(child, childPath(path, key)),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    return node;
  }
  return walk(value, '');
}
