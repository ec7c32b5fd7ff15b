import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { chromium, type Browser, type Page } from 'playwright-core';
import { isDocumentClientId } from '../../core/oauth/metadata-document';
import { consoleClient, createConsoleUser, type ConsoleUser } from '../console/helpers';
import { startSvc, type TestSvc } from '../helpers/harness';
import { post, toolCall } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];
const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** The app's redirect URI: a real listener that records each authorization response. */
async function startCallback(): Promise<{ url: string; received: URL[]; close(): Promise<void> }> {
  const received: URL[] = [];
  const server = http.createServer((req, res) => {
    received.push(new URL(req.url ?? '/', 'http://127.0.0.1'));
    res.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window.');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callback`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An MCP client's OAuth state, kept in memory the way a connector keeps it. */
class MemoryProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  constructor(readonly redirectUrl: string) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test Connector',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

async function form(url: string, fields: Record<string, string>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>,
  };
}

async function register(svc: TestSvc, redirectUris: string[]): Promise<string> {
  const res = await fetch(`${svc.baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Raw client',
      redirect_uris: redirectUris,
      token_endpoint_auth_method: 'none',
    }),
  });
  assert.equal(res.status, 201);
  return ((await res.json()) as { client_id: string }).client_id;
}

describe('OAuth 2.1 for MCP clients without a static key (SPEC §8)', function () {
  this.timeout(120_000);

  describe('an MCP SDK client through sign-in and consent in a real browser', () => {
    let svc: TestSvc;
    let browser: Browser;
    let page: Page;
    let user: ConsoleUser;
    let callback: Awaited<ReturnType<typeof startCallback>>;

    before(async function () {
      requireChromium(this);
      svc = await startSvc();
      user = await createConsoleUser(svc, {
        name: 'Connector Owner',
        email: 'owner@oauth.example',
        balance: 100_000n,
        keyName: 'unused',
      });
      callback = await startCallback();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
      page = await (await browser.newContext({ locale: 'en-US' })).newPage();
    });
    after(async () => {
      await browser?.close();
      await callback?.close();
      await svc?.close();
    });

    it('registers, gets consent, calls a billed tool, refreshes, and is refused once revoked in the console', async () => {
      const mcpUrl = new URL(`${svc.baseUrl}/v1/mcp`);
      const provider = new MemoryProvider(callback.url);
      const first = new Client({ name: 'oauth-test', version: '1.0.0' });
      // No token yet: the 401 leads the SDK to the metadata, registration and the authorization URL.
      await assert.rejects(
        first.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider })),
        UnauthorizedError,
      );
      const clientId = provider.info?.client_id ?? '';
      assert.match(clientId, /^oac_/, 'registered dynamically');
      const authorizationUrl = provider.authorizationUrl;
      assert.ok(authorizationUrl, 'the SDK was sent to the authorization endpoint');
      assert.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');

      // The person signs in to the console and consents.
      await page.goto(authorizationUrl.href);
      await page.waitForURL(/\/console\/sign-in\?next=/);
      await page.getByLabel('Email address').fill(user.email);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.waitForURL(/\/console\/authorize\?/);
      assert.equal(await page.getByTestId('client-name').textContent(), 'Test Connector');
      assert.equal(await page.getByTestId('consent-account').textContent(), 'Connector Owner');
      assert.equal(await page.getByTestId('consent-scope').textContent(), 'tools');
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.waitForURL(/\/callback\?/);
      const answer = callback.received.findLast((url) => url.pathname === '/callback');
      assert.ok(answer);
      assert.equal(answer.searchParams.get('iss'), svc.baseUrl, 'the authorization response names its issuer');
      const code = answer.searchParams.get('code') ?? '';
      assert.match(code, /^svc_oac_/);

      const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
      await transport.finishAuth(code);
      const accessToken = provider.saved?.access_token ?? '';
      assert.match(accessToken, /^svc_oat_/);
      const client = new Client({ name: 'oauth-test', version: '1.0.0' });
      await client.connect(transport);

      // A tool call billed to the consenting account's wallet, recorded under the grant.
      const before = await svc.wallet(user.accountId);
      const result = (await client.callTool({ name: 'web_search', arguments: { query: 'تهران' } })) as CallToolResult;
      assert.equal(result.isError, false, JSON.stringify(result.content));
      const grant = await svc.store.db
        .withTables<{ oauth_grants: { id: string; account_id: string; revoked_at: bigint | null } }>()
        .selectFrom('oauth_grants')
        .selectAll()
        .where('account_id', '=', user.accountId)
        .executeTakeFirstOrThrow();
      const usage = await svc.store.db.selectFrom('usage_records').selectAll().where('key_id', '=', grant.id).execute();
      assert.equal(usage.length, 1);
      assert.equal(usage[0]?.account_id, user.accountId);
      assert.ok((usage[0]?.cost ?? 0n) > 0n);
      const after = await svc.wallet(user.accountId);
      assert.equal(after.balance, before.balance - (usage[0]?.cost ?? 0n), 'the call was charged once, to this wallet');

      // Only digests are stored.
      const stored = await svc.store.db
        .withTables<{ oauth_tokens: { token_hash: string } }>()
        .selectFrom('oauth_tokens')
        .select('token_hash')
        .execute();
      assert.ok(stored.some((row) => row.token_hash === sha256(accessToken)));
      assert.ok(stored.every((row) => !row.token_hash.includes('svc_')));

      // Refresh: a new pair; the old refresh token is spent.
      const oldRefresh = provider.saved?.refresh_token ?? '';
      assert.equal(await auth(provider, { serverUrl: mcpUrl }), 'AUTHORIZED');
      assert.notEqual(provider.saved?.access_token, accessToken);
      assert.notEqual(provider.saved?.refresh_token, oldRefresh);
      const again = (await client.callTool({ name: 'web_search', arguments: { query: 'x' } })) as CallToolResult;
      assert.equal(again.isError, false);

      // The person disconnects the app on the console's keys page.
      await page.goto(`${svc.baseUrl}/console/keys`);
      const row = page.getByTestId('connected-apps').locator('tr', { hasText: 'Test Connector' });
      await row.getByRole('button', { name: /Disconnect/ }).click();
      await page.waitForURL(/done=app_revoked/);
      assert.equal(await page.getByTestId('connected-apps').count(), 0);

      const refused = await post(svc.baseUrl, toolCall('web_search', { query: 'x' }), {
        authorization: `Bearer ${provider.saved?.access_token ?? ''}`,
      });
      assert.equal(refused.status, 401);
      await assert.rejects(client.callTool({ name: 'web_search', arguments: { query: 'x' } }));
      const refresh = await form(`${svc.baseUrl}/oauth/token`, {
        grant_type: 'refresh_token',
        refresh_token: provider.saved?.refresh_token ?? '',
        client_id: clientId,
      });
      assert.equal(refresh.status, 400);
      assert.equal(refresh.body['error'], 'invalid_grant');
      await client.close();
    });
  });

  describe('Client ID Metadata Documents', () => {
    let svc: TestSvc;
    let user: ConsoleUser;
    let docs: http.Server;
    let docBase = '';
    const documents = new Map<string, unknown>();
    const redirect = 'http://127.0.0.1:9/cb';

    before(async () => {
      svc = await startSvc({ oauthLoopbackMetadataDocuments: true });
      user = await createConsoleUser(svc, {
        name: 'Doc Owner',
        email: 'doc@oauth.example',
        balance: 50_000n,
        keyName: 'k',
      });
      docs = http.createServer((req, res) => {
        const doc = documents.get(req.url ?? '');
        if (doc === undefined) return void res.writeHead(404).end();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
      });
      await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
      docBase = `http://127.0.0.1:${(docs.address() as AddressInfo).port}`;
    });
    after(async () => {
      docs?.closeAllConnections();
      await new Promise<void>((resolve) => (docs === undefined ? resolve() : docs.close(() => resolve())));
      await svc?.close();
    });

    async function authorizePage(clientId: string, redirectUri = redirect) {
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: redirectUri,
        response_type: 'code',
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
      });
      return { browser, query, page: await browser.get(`/authorize?${query.toString()}`) };
    }

    it('the metadata says they are supported; a URL client_id is read and named on the consent page', async () => {
      const server = (await (await fetch(`${svc.baseUrl}/.well-known/oauth-authorization-server`)).json()) as Record<
        string,
        unknown
      >;
      assert.equal(server['client_id_metadata_document_supported'], true);
      const clientId = `${docBase}/good.json`;
      documents.set('/good.json', { client_id: clientId, client_name: 'Doc Client', redirect_uris: [redirect] });
      const { browser, query, page } = await authorizePage(clientId);
      assert.equal(page.status, 200, page.body);
      assert.match(page.body, /Doc Client/);
      const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const answer = await browser.post('/authorize', {
        ...Object.fromEntries(query),
        csrf_token: csrf,
        decision: 'allow',
      });
      assert.equal(answer.status, 303);
      assert.match(answer.headers.get('location') ?? '', /[?&]code=svc_oac_/);
    });

    it('a document naming another client_id, or another redirect URI, is refused on the page', async () => {
      const clientId = `${docBase}/liar.json`;
      documents.set('/liar.json', {
        client_id: `${docBase}/other.json`,
        client_name: 'Liar',
        redirect_uris: [redirect],
      });
      const liar = await authorizePage(clientId);
      assert.equal(liar.page.status, 400);
      assert.equal(liar.page.headers.get('location'), null);
      assert.match(liar.page.body, /another client_id/);
      const honest = `${docBase}/honest.json`;
      documents.set('/honest.json', { client_id: honest, client_name: 'Honest', redirect_uris: [redirect] });
      const elsewhere = await authorizePage(honest, 'http://127.0.0.1:9/elsewhere');
      assert.equal(elsewhere.page.status, 400);
      assert.equal(elsewhere.page.headers.get('location'), null);
    });
  });

  describe('the HTTP endpoints', () => {
    let svc: TestSvc;
    let user: ConsoleUser;
    let offset = 0;
    const redirect = 'http://127.0.0.1:9/cb';

    before(async () => {
      svc = await startSvc({ now: () => Date.now() + offset });
      user = await createConsoleUser(svc, {
        name: 'Raw Owner',
        email: 'raw@oauth.example',
        balance: 50_000n,
        keyName: 'k',
      });
    });
    after(async () => svc?.close());
    afterEach(() => (offset = 0));

    /** Signs in, consents, and returns the code from the redirect. */
    async function consent(clientId: string, challenge: string, extra: Record<string, string> = {}) {
      const browser = consoleClient(svc.baseUrl);
      const signed = await browser.signIn(user.email, user.password);
      assert.equal(signed.status, 303);
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: redirect,
        response_type: 'code',
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state: 'st-1',
        ...extra,
      });
      const page = await browser.get(`/authorize?${query.toString()}`);
      assert.equal(page.status, 200, page.body);
      const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const answer = await browser.post('/authorize', {
        ...Object.fromEntries(query),
        csrf_token: csrf,
        decision: 'allow',
      });
      assert.equal(answer.status, 303);
      const location = new URL(answer.headers.get('location') ?? '');
      assert.equal(location.searchParams.get('state'), 'st-1');
      return location.searchParams.get('code') ?? '';
    }

    async function exchange(clientId: string, code: string, verifier: string, redirectUri = redirect) {
      return form(`${svc.baseUrl}/oauth/token`, {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        client_id: clientId,
        redirect_uri: redirectUri,
      });
    }

    function assertOAuthError(reply: { status: number; body: Record<string, unknown> }, error: string): void {
      assert.equal(reply.status, error === 'invalid_client' ? 401 : 400, JSON.stringify(reply.body));
      assert.equal(reply.body['error'], error);
      assert.equal(typeof reply.body['error_description'], 'string');
    }

    it('a 401 points at the protected-resource metadata, which points at the console', async () => {
      const reply = await post(svc.baseUrl, INIT);
      assert.equal(reply.status, 401);
      const header = reply.headers.get('www-authenticate') ?? '';
      const metadataUrl = /resource_metadata="([^"]+)"/.exec(header)?.[1] ?? '';
      assert.equal(metadataUrl, `${svc.baseUrl}/.well-known/oauth-protected-resource/v1/mcp`);
      const resource = (await (await fetch(metadataUrl)).json()) as Record<string, unknown>;
      assert.equal(resource['resource'], `${svc.baseUrl}/v1/mcp`);
      assert.deepEqual(resource['authorization_servers'], [svc.baseUrl]);
      const server = (await (await fetch(`${svc.baseUrl}/.well-known/oauth-authorization-server`)).json()) as Record<
        string,
        unknown
      >;
      assert.equal(server['issuer'], svc.baseUrl);
      assert.deepEqual(server['code_challenge_methods_supported'], ['S256']);
      assert.equal(server['authorization_response_iss_parameter_supported'], true);
    });

    it('registration refuses a redirect URI that is neither https nor loopback', async () => {
      const res = await fetch(`${svc.baseUrl}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: ['http://evil.example/cb'] }),
      });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as Record<string, unknown>)['error'], 'invalid_redirect_uri');
    });

    it('an unregistered redirect_uri, a request without PKCE or for another resource: a page, never a redirect', async () => {
      const clientId = await register(svc, [redirect]);
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const bad = await browser.get(
        `/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: 'https://evil.example/cb', response_type: 'code' }).toString()}`,
      );
      assert.equal(bad.status, 400);
      assert.equal(bad.headers.get('location'), null);
      // RFC 9700 §4.11.2: the redirect URI is registered but nobody approved it yet.
      const noPkce = await browser.get(
        `/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: redirect, response_type: 'code', state: 's' }).toString()}`,
      );
      assert.equal(noPkce.status, 400);
      assert.equal(noPkce.headers.get('location'), null);
      assert.match(noPkce.body, /PKCE is required/);
      const elsewhere = await browser.get(
        `/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: redirect, response_type: 'code', code_challenge: pkce().challenge, code_challenge_method: 'S256', resource: 'https://other.example/mcp' }).toString()}`,
      );
      assert.equal(elsewhere.status, 400);
      assert.equal(elsewhere.headers.get('location'), null);
      assert.match(elsewhere.body, /invalid_target/);
    });

    it('a metadata document must be at https: the core never fetches over http', () => {
      assert.equal(isDocumentClientId('http://127.0.0.1:9/client.json', false), false);
      assert.equal(isDocumentClientId('http://app.example/client.json', false), false);
      assert.equal(isDocumentClientId('https://app.example/', false), false, 'a path is required');
      assert.equal(isDocumentClientId('https://app.example/client.json', false), true);
      assert.equal(isDocumentClientId('http://127.0.0.1:9/client.json', true), true, 'the test setup switch');
    });

    it('consent without the session CSRF token issues no code', async () => {
      const clientId = await register(svc, [redirect]);
      const browser = consoleClient(svc.baseUrl);
      await browser.signIn(user.email, user.password);
      const answer = await browser.post('/authorize', {
        client_id: clientId,
        redirect_uri: redirect,
        response_type: 'code',
        code_challenge: pkce().challenge,
        code_challenge_method: 'S256',
        csrf_token: 'forged',
        decision: 'allow',
      });
      assert.equal(answer.status, 403);
      assert.equal(answer.headers.get('location'), null);
    });

    it('a wrong PKCE verifier is invalid_grant (and does not spend the code)', async () => {
      const clientId = await register(svc, [redirect]);
      const { verifier, challenge } = pkce();
      const code = await consent(clientId, challenge);
      assertOAuthError(await exchange(clientId, code, pkce().verifier), 'invalid_grant');
      const good = await exchange(clientId, code, verifier);
      assert.equal(good.status, 200, JSON.stringify(good.body));
      assert.equal(good.body['token_type'], 'Bearer');
      assert.equal(good.headers.get('cache-control'), 'no-store');
    });

    it('an access token acts like a tools-scoped key: refused on the chat API', async () => {
      const clientId = await register(svc, [redirect]);
      const { verifier, challenge } = pkce();
      const tokens = await exchange(clientId, await consent(clientId, challenge), verifier);
      const chat = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${String(tokens.body['access_token'])}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(chat.status, 403);
      const body = (await chat.json()) as { error: { code: string; type: string; param: unknown; message: string } };
      assert.equal(body.error.code, 'permission_denied');
      assert.match(body.error.message, /limited to scope 'tools'/);
    });

    it('a reused code is invalid_grant and revokes what the first exchange issued', async () => {
      const clientId = await register(svc, [redirect]);
      const { verifier, challenge } = pkce();
      const code = await consent(clientId, challenge);
      const first = await exchange(clientId, code, verifier);
      assert.equal(first.status, 200);
      const token = String(first.body['access_token']);
      assert.equal((await post(svc.baseUrl, INIT, { authorization: `Bearer ${token}` })).status, 200);
      assertOAuthError(await exchange(clientId, code, verifier), 'invalid_grant');
      assert.equal((await post(svc.baseUrl, INIT, { authorization: `Bearer ${token}` })).status, 401);
    });

    it('an expired code is invalid_grant', async () => {
      const clientId = await register(svc, [redirect]);
      const { verifier, challenge } = pkce();
      const code = await consent(clientId, challenge);
      offset = 61_000;
      assertOAuthError(await exchange(clientId, code, verifier), 'invalid_grant');
    });

    it('a redirect_uri other than the authorization request’s is invalid_grant', async () => {
      const other = 'http://127.0.0.1:9/other';
      const clientId = await register(svc, [redirect, other]);
      const { verifier, challenge } = pkce();
      const code = await consent(clientId, challenge);
      assertOAuthError(await exchange(clientId, code, verifier, other), 'invalid_grant');
    });

    it('a reused refresh token is invalid_grant and ends the whole grant', async () => {
      const clientId = await register(svc, [redirect]);
      const { verifier, challenge } = pkce();
      const tokens = await exchange(clientId, await consent(clientId, challenge), verifier);
      const refresh = (token: unknown) =>
        form(`${svc.baseUrl}/oauth/token`, {
          grant_type: 'refresh_token',
          refresh_token: String(token),
          client_id: clientId,
        });
      const rotated = await refresh(tokens.body['refresh_token']);
      assert.equal(rotated.status, 200);
      assertOAuthError(await refresh(tokens.body['refresh_token']), 'invalid_grant');
      // The thief's reuse also cost the rotated pair: both are refused.
      assertOAuthError(await refresh(rotated.body['refresh_token']), 'invalid_grant');
      const reply = await post(svc.baseUrl, INIT, { authorization: `Bearer ${String(rotated.body['access_token'])}` });
      assert.equal(reply.status, 401);
    });

    it('bad token requests get RFC 6749 errors', async () => {
      const clientId = await register(svc, [redirect]);
      assertOAuthError(
        await form(`${svc.baseUrl}/oauth/token`, { grant_type: 'password', client_id: clientId }),
        'unsupported_grant_type',
      );
      assertOAuthError(
        await form(`${svc.baseUrl}/oauth/token`, { grant_type: 'authorization_code', code: 'x', client_id: clientId }),
        'invalid_request',
      );
      assertOAuthError(await exchange(clientId, 'svc_oac_nonsense', pkce().verifier), 'invalid_grant');
    });
  });
});
