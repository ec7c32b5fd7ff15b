import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import ts from 'typescript';

/*
 * Checks JSON against the types of the official `@anthropic-ai/sdk` (its .d.ts files, read with
 * the TypeScript parser): every required property present, none the type does not declare,
 * primitives, literals, unions, arrays and nested interfaces as declared.
 */

type Decl = ts.InterfaceDeclaration | ts.TypeAliasDeclaration;

const FILES = ['resources/messages/messages.d.ts', 'resources/models.d.ts', 'resources/shared.d.ts'];

function sdkRoot(): string {
  const require = createRequire(__filename);
  let dir = path.dirname(require.resolve('@anthropic-ai/sdk'));
  while (!dir.endsWith(path.join('@anthropic-ai', 'sdk'))) dir = path.dirname(dir);
  return dir;
}

let declarations: Map<string, Decl> | undefined;

function load(): Map<string, Decl> {
  if (declarations !== undefined) return declarations;
  const found = new Map<string, Decl>();
  const root = sdkRoot();
  const visit = (node: ts.Node, prefix: string): void => {
    if (ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) {
      const name = prefix + node.name.text;
      // The top-level declaration wins over a namespace's member of the same short name.
      found.set(name, node);
      if (prefix !== '' && !found.has(node.name.text)) found.set(`~${node.name.text}`, node);
    } else if (ts.isModuleDeclaration(node) && node.body !== undefined && ts.isModuleBlock(node.body)) {
      for (const s of node.body.statements) visit(s, `${prefix}${node.name.text}.`);
    }
  };
  for (const file of FILES) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    for (const statement of source.statements) visit(statement, '');
  }
  declarations = found;
  return found;
}

function resolve(name: string): Decl | undefined {
  const all = load();
  const parts = name.split('.');
  // `MessagesAPI.Container` is an import alias; `RawMessageDeltaEvent.Delta` a namespace member.
  return all.get(name) ?? all.get(parts.slice(1).join('.')) ?? all.get(parts.at(-1) ?? '');
}

function describe(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

function members(decl: ts.InterfaceDeclaration): ts.PropertySignature[] {
  const own = decl.members.filter(ts.isPropertySignature);
  const inherited = (decl.heritageClauses ?? []).flatMap((h) =>
    h.types.flatMap((t) => {
      const base = resolve(t.expression.getText());
      return base !== undefined && ts.isInterfaceDeclaration(base) ? members(base) : [];
    }),
  );
  return [...inherited, ...own];
}

function check(value: unknown, type: ts.TypeNode, at: string): string[] {
  switch (type.kind) {
    case ts.SyntaxKind.StringKeyword:
      return typeof value === 'string' ? [] : [`${at}: expected string, got ${describe(value)}`];
    case ts.SyntaxKind.NumberKeyword:
      return typeof value === 'number' ? [] : [`${at}: expected number, got ${describe(value)}`];
    case ts.SyntaxKind.BooleanKeyword:
      return typeof value === 'boolean' ? [] : [`${at}: expected boolean, got ${describe(value)}`];
    case ts.SyntaxKind.UnknownKeyword:
    case ts.SyntaxKind.AnyKeyword:
      return [];
    case ts.SyntaxKind.NullKeyword:
      return value === null ? [] : [`${at}: expected null`];
  }
  if (ts.isParenthesizedTypeNode(type)) return check(value, type.type, at);
  if (ts.isLiteralTypeNode(type)) {
    const lit = type.literal;
    if (lit.kind === ts.SyntaxKind.NullKeyword) return value === null ? [] : [`${at}: expected null`];
    if (ts.isStringLiteral(lit))
      return value === lit.text ? [] : [`${at}: expected '${lit.text}', got ${JSON.stringify(value)}`];
    if (lit.kind === ts.SyntaxKind.TrueKeyword) return value === true ? [] : [`${at}: expected true`];
    if (lit.kind === ts.SyntaxKind.FalseKeyword) return value === false ? [] : [`${at}: expected false`];
    return [];
  }
  if (ts.isUnionTypeNode(type)) {
    const tries = type.types.map((t) => check(value, t, at));
    if (tries.some((errors) => errors.length === 0)) return [];
    const fewest = tries.reduce((a, b) => (b.length < a.length ? b : a));
    return [`${at}: matches no member of ${type.getText().slice(0, 120)}; nearest: ${fewest.join('; ')}`];
  }
  if (ts.isArrayTypeNode(type)) {
    if (!Array.isArray(value)) return [`${at}: expected array, got ${describe(value)}`];
    return value.flatMap((v, i) => check(v, type.elementType, `${at}[${i}]`));
  }
  if (ts.isTypeLiteralNode(type)) return value !== null && typeof value === 'object' ? [] : [`${at}: expected object`];
  if (ts.isTypeReferenceNode(type)) {
    const name = type.typeName.getText();
    const arg = type.typeArguments?.[0];
    if (name === 'Array' && arg !== undefined) return check(value, ts.factory.createArrayTypeNode(arg), at);
    if (name === 'Record') return value !== null && typeof value === 'object' ? [] : [`${at}: expected object`];
    const decl = resolve(name);
    if (decl === undefined) return [];
    return checkDecl(value, decl, at);
  }
  return [];
}

function checkDecl(value: unknown, decl: Decl, at: string): string[] {
  if (ts.isTypeAliasDeclaration(decl)) return check(value, decl.type, at);
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return [`${at}: expected ${decl.name.text} object, got ${describe(value)}`];
  const obj = value as Record<string, unknown>;
  const props = members(decl);
  const errors: string[] = [];
  const declared = new Set<string>();
  for (const p of props) {
    const key = p.name.getText().replace(/^['"]|['"]$/g, '');
    declared.add(key);
    if (!(key in obj)) {
      if (p.questionToken === undefined) errors.push(`${at}.${key}: required by ${decl.name.text}, missing`);
      continue;
    }
    if (p.type !== undefined) errors.push(...check(obj[key], p.type, `${at}.${key}`));
  }
  for (const key of Object.keys(obj))
    if (!declared.has(key)) errors.push(`${at}.${key}: not a property of ${decl.name.text}`);
  return errors;
}

/** Throws unless `value` has the shape of the SDK's type `typeName` (e.g. 'Message', 'RawMessageStreamEvent'). */
export function assertAnthropicShape(typeName: string, value: unknown): void {
  const decl = resolve(typeName);
  if (decl === undefined) throw new Error(`no type ${typeName} in @anthropic-ai/sdk`);
  const errors = checkDecl(value, decl, typeName);
  if (errors.length > 0)
    throw new Error(`not a valid ${typeName}:\n  ${errors.join('\n  ')}\n${JSON.stringify(value)}`);
}
