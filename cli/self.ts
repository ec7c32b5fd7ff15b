import path from 'node:path';
import type * as Edge from '../core/edge';

/**
 * How a user runs this installation's svc, for the commands the CLI's messages suggest: `./svc`
 * in the installation's folder, its full path elsewhere. Never `npx svc`, which outside the
 * checkout resolves to an unrelated package of that name on the npm registry.
 */
export function svcCommand(cwd: string = process.cwd()): string {
  // Required when a message needs it, not at start: `svc --help` should not load the whole core.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const dir = (require('../core/edge') as typeof Edge).installationDir();
  return path.resolve(cwd) === dir ? './svc' : path.join(dir, 'svc');
}
