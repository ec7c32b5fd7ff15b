import { parseGrpcAddress, parseWorkers } from '../core';
import type * as Compose from './compose';
import type { CommandContext } from './context';
import { UsageError } from './args';

// The composition root (cli/compose.ts) owns start-up and shutdown; these only hand over. It is
// required here, not at the top: cli/entry.ts has started OpenTelemetry by now, and compose
// loads gRPC, HTTP and the database drivers, which must be instrumented as they first load.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const compose = (): typeof Compose => require('./compose') as typeof Compose;

export async function serve(ctx: CommandContext): Promise<void> {
  const flag = ctx.args.strings.get('workers');
  let workers: number | undefined;
  if (flag !== undefined) {
    try {
      workers = parseWorkers('--workers', flag);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const { runServe } = compose();
  await runServe(ctx.env, { telemetry: ctx.telemetry }, workers);
}

export async function core(ctx: CommandContext): Promise<void> {
  const { runCore } = compose();
  await runCore(ctx.env, { telemetry: ctx.telemetry });
}

export async function gateway(ctx: CommandContext): Promise<void> {
  const flag = ctx.args.strings.get('core');
  let coreAddress: string | undefined;
  if (flag !== undefined) {
    try {
      coreAddress = parseGrpcAddress('--core', flag).text;
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const { runGateway } = compose();
  await runGateway(ctx.env, coreAddress, { telemetry: ctx.telemetry });
}
