import { invalidArgument } from '../errors';
import { checkPlainText } from '../text/plain-text';

const MARKUP = /[<>]/;
const EMAIL = /^[^\s@<>"']+@[^\s@<>"']+\.[^\s@<>"']+$/;

/** Trims and checks a short text shown back on pages: bounded, no markup, no invisible characters. */
export function cleanText(
  param: string,
  what: string,
  value: string,
  max: number,
  options: { required: boolean },
): string {
  const text = value.trim().normalize('NFC');
  if (options.required && text === '') throw invalidArgument(param, `${what} is required.`);
  if (text.length > max)
    throw invalidArgument(param, `${what} must be at most ${max} characters (this one has ${text.length}).`);
  if (MARKUP.test(text)) throw invalidArgument(param, `${what} may not contain "<" or ">": markup is not allowed.`);
  return checkPlainText(param, text, what);
}

/** A key label: 1-100 characters of plain text. */
export function cleanLabel(value: string): string {
  return cleanText('name', 'The label', value, 100, { required: true });
}

/** Lower-cased and checked; the same address always finds the same account. */
export function cleanEmail(value: string): string {
  const email = value.trim().toLowerCase();
  if (email === '') throw invalidArgument('email', 'The email address is required.');
  if (email.length > 254 || !EMAIL.test(email)) throw invalidArgument('email', 'That is not a valid email address.');
  return checkPlainText('email', email, 'The email address');
}

export const MIN_PASSWORD = 10;
export const MAX_PASSWORD = 200;

export function checkNewPassword(param: string, password: string): string {
  if (password.length < MIN_PASSWORD)
    throw invalidArgument(param, `The password must be at least ${MIN_PASSWORD} characters.`);
  if (password.length > MAX_PASSWORD)
    throw invalidArgument(param, `The password must be at most ${MAX_PASSWORD} characters.`);
  return password;
}
