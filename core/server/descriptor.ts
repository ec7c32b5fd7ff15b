import fs from 'node:fs';
import path from 'node:path';

/**
 * The FileDescriptorSet of the core's protos (`npm run generate` writes gen/svc.binpb), for
 * server reflection. Looked up from the sources and from the compiled dist/ tree alike.
 */
export function loadDescriptorSet(): Buffer {
  let dir = __dirname;
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, 'gen', 'svc.binpb');
    if (fs.existsSync(candidate)) return fs.readFileSync(candidate);
    dir = path.dirname(dir);
  }
  throw new Error('gen/svc.binpb not found: run `npm run generate`');
}
