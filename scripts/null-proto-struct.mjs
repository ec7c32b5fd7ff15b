// ts-proto builds google.protobuf.Struct maps on plain objects, where `obj["__proto__"] = v`
// sets the prototype instead of a key: a JSON object key named "__proto__" (an MCP tool
// argument, say) silently vanished on its way through the core instead of being refused like
// any unknown name. Run by `npm run generate`: the maps are made on null-prototype objects.
import { readFileSync, writeFileSync } from 'node:fs';
import { URL } from 'node:url';

const file = new URL('../gen/google/protobuf/struct.ts', import.meta.url);
let text = readFileSync(file, 'utf8');
const edits = [
  ['return { fields: {} };', 'return { fields: globalThis.Object.create(null) };'],
  [
    'const object: { [key: string]: any } = {};\n    if (message.fields) {',
    'const object: { [key: string]: any } = globalThis.Object.create(null);\n    if (message.fields) {',
  ],
  [
    '        return acc;\n      },\n      {},\n    );\n    return message;',
    '        return acc;\n      },\n      globalThis.Object.create(null),\n    );\n    return message;',
  ],
];
for (const [from, to] of edits) {
  if (text.includes(to)) continue;
  if (!text.includes(from)) throw new Error(`null-proto-struct: pattern not found in struct.ts: ${from}`);
  text = text.replace(from, to);
}
writeFileSync(file, text);
