import { createAccountWithSignIn } from '../../core/console/accounts';
import { consoleDb } from '../../core/console/tables';
import type { TestSvc } from '../helpers/harness';

/** An account with a console sign-in, a funded wallet and one API key. */
export interface ConsoleUser {
  readonly accountId: string;
  readonly email: string;
  readonly password: string;
  readonly keyId: string;
  readonly key: string;
}

export async function createConsoleUser(
  svc: TestSvc,
  input: { name: string; email: string; balance: bigint; keyName: string },
): Promise<ConsoleUser> {
  const password = `pw-${input.email}-long-enough`;
  const account = await createAccountWithSignIn(consoleDb(svc.store), {
    name: input.name,
    email: input.email,
    password,
    now: Date.now(),
  });
  if (input.balance > 0n)
    await svc.core.deps.wallet.topUp({ accountId: account.id, amount: input.balance, reference: 'test funding' });
  const { key, secret } = await svc.core.keys.create({ accountId: account.id, name: input.keyName });
  return { accountId: account.id, email: input.email, password, keyId: key.id, key: secret };
}

export interface Response {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/** A cookie-keeping HTTP client for the console, following no redirects (tests check them). */
export function consoleClient(baseUrl: string, extraHeaders: Record<string, string> = {}) {
  const cookies = new Map<string, string>();

  function remember(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = (pair ?? '').indexOf('=');
      const name = (pair ?? '').slice(0, eq).trim();
      const value = (pair ?? '').slice(eq + 1).trim();
      if (attrs.some((a) => a.trim().toLowerCase() === 'max-age=0')) cookies.delete(name);
      else cookies.set(name, value);
    }
  }

  async function request(method: string, path: string, form?: Record<string, string>): Promise<Response> {
    const headers: Record<string, string> = { ...extraHeaders };
    if (cookies.size > 0) headers['cookie'] = [...cookies].map(([n, v]) => `${n}=${v}`).join('; ');
    if (form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(`${baseUrl}/console${path}`, {
      method,
      headers,
      redirect: 'manual',
      ...(form === undefined ? {} : { body: new URLSearchParams(form).toString() }),
    });
    remember(res.headers);
    return { status: res.status, headers: res.headers, body: await res.text() };
  }

  return {
    cookies,
    get: (path: string) => request('GET', path),
    post: (path: string, form: Record<string, string>) => request('POST', path, form),
    /** The CSRF token of the first form on a page. */
    async csrf(path: string): Promise<string> {
      const page = await request('GET', path);
      const match = /name="csrf_token" value="([^"]+)"/.exec(page.body);
      if (match?.[1] === undefined) throw new Error(`no CSRF token on ${path} (status ${page.status})`);
      return match[1];
    },
    /** A hidden field of the first form on a page that has it. */
    async hidden(path: string, name: string): Promise<string> {
      const page = await request('GET', path);
      const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(page.body);
      if (match?.[1] === undefined) throw new Error(`no ${name} on ${path} (status ${page.status})`);
      return match[1];
    },
    /**
     * Submits the key form of /keys as a browser would: the page's CSRF token and form id, the
     * POST, and the GET its redirect asks for. `page` is the redirect's page, or the refusal.
     */
    async createKey(fields: Record<string, string>): Promise<{ post: Response; page: Response; formId: string }> {
      const page = await request('GET', '/keys');
      const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const formId = /name="form_id" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const post = await request('POST', '/keys', { csrf_token: csrf, form_id: formId, ...fields });
      const location = post.headers.get('location');
      if (post.status !== 303 || location === null) return { post, page: post, formId };
      return { post, page: await request('GET', location.replace(/^\/console/, '')), formId };
    },
    async signIn(email: string, password: string): Promise<Response> {
      const token = await this.csrf('/sign-in');
      return request('POST', '/sign-in', { csrf_token: token, email, password });
    },
    async signInOperator(adminToken: string): Promise<Response> {
      const token = await this.csrf('/sign-in');
      return request('POST', '/sign-in/operator', { csrf_token: token, admin_token: adminToken });
    },
  };
}

export type ConsoleClient = ReturnType<typeof consoleClient>;
