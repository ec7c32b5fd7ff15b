import type { ErrorCode } from './codes';

/** Machine-readable facts that travel with an error (e.g. balance and price). Never secrets. */
export type ErrorDetails = Readonly<Record<string, string | number | boolean | null>>;

export interface SvcErrorOptions {
  /** The request field at fault, in the client's own naming (e.g. `messages[0].role`). */
  readonly param?: string;
  readonly details?: ErrorDetails;
  /** The real cause, for the log and the span only; never sent to a client. */
  readonly cause?: unknown;
}

/**
 * A domain error of the core. Its message is safe to show to the client; internal detail goes
 * in `cause`.
 */
export class SvcError extends Error {
  override readonly name = 'SvcError';
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly details: ErrorDetails | undefined;

  constructor(code: ErrorCode, message: string, options: SvcErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.param = options.param;
    this.details = options.details;
  }
}

/** Shorthand for the most common domain error: a bad field. */
export function invalidArgument(param: string, message: string): SvcError {
  return new SvcError('invalid_argument', message, { param });
}

export function isSvcError(error: unknown): error is SvcError {
  return error instanceof SvcError;
}
