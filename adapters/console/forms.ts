import type { Context } from 'koa';
import { MAX_PASSWORD, MIN_PASSWORD, SvcError } from '../../core/edge';
import { html, type Html } from './html';
import { readBody } from '../http/request';

/** A submitted form; a field sent twice keeps its first value. */
export type Form = ReadonlyMap<string, string>;

/** Reads an `application/x-www-form-urlencoded` body (the only kind the console's forms send). */
export async function readForm(ctx: Context, maxBytes: number): Promise<Form> {
  const type = ctx.get('content-type').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new SvcError(
      'invalid_argument',
      'The console accepts only submitted forms (application/x-www-form-urlencoded).',
    );
  }
  const body = await readBody(ctx, maxBytes);
  const form = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) if (!form.has(name)) form.set(name, value);
  return form;
}

export function field(form: Form, name: string): string {
  return form.get(name) ?? '';
}

/** Cookie values by name, from the Cookie header. */
export function readCookies(header: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/** `Secure` only behind TLS (directly or by a proxy that says so), or the cookie never returns over plain HTTP. */
export function isHttps(ctx: Context): boolean {
  const forwarded = ctx.get('x-forwarded-proto').split(',', 1)[0]?.trim().toLowerCase();
  return forwarded === 'https' || (ctx.req.socket as { encrypted?: boolean }).encrypted === true;
}

export function setCookie(ctx: Context, name: string, value: string, options: { maxAgeSeconds?: number }): void {
  const parts = [`${name}=${value}`, 'Path=/console', 'HttpOnly', 'SameSite=Strict'];
  if (options.maxAgeSeconds !== undefined) parts.push(`Max-Age=${options.maxAgeSeconds}`);
  if (isHttps(ctx)) parts.push('Secure');
  ctx.append('set-cookie', parts.join('; '));
}

/** A new password's input, with the core's length rules (core/console/validate.ts) as its bounds. */
export function newPasswordInput(id: string, name: string): Html {
  return html`<input
    id="${id}"
    name="${name}"
    type="password"
    autocomplete="new-password"
    required
    minlength="${MIN_PASSWORD}"
    maxlength="${MAX_PASSWORD}"
  />`;
}
