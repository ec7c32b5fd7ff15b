import { UsageError } from './args';
import { svcCommand } from './self';

/**
 * The password piped to `--password-stdin`: the first line of standard input, without its line
 * ending. A terminal gets no prompt: the flag is for scripts (`printf %s "$PW" | svc …`).
 */
export async function readPassword(stream: NodeJS.ReadableStream = process.stdin): Promise<string> {
  if ((stream as { isTTY?: boolean }).isTTY === true) {
    throw new UsageError(
      `--password-stdin reads the password from a pipe, e.g. printf %s "$PASSWORD" | ${svcCommand()} account set-sign-in …`,
    );
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  const password = Buffer.concat(chunks).toString('utf8').split(/\r?\n/, 1)[0] ?? '';
  if (password === '') throw new UsageError('--password-stdin: standard input was empty; pipe the password in');
  return password;
}
