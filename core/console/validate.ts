import { invalidArgument } from '../errors';
import { checkPlainText } from '../text/plain-text';

export { cleanLabel, cleanText } from '../text/plain-text';

const EMAIL = /^[^\s@<>"']+@[^\s@<>"']+\.[^\s@<>"']+$/;

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
