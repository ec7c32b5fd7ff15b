import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/** Copies of the provider wire samples of ../shared/ref/providers (provenance in its SOURCES.md), kept in the repo so CI has them. */
export const SAMPLES_DIR = path.join(__dirname, 'samples');

export function sample(name: string): string {
  return readFileSync(path.join(SAMPLES_DIR, name), 'utf8');
}

export type FakeProvider = 'perplexity' | 'searxng' | 'neshan' | 'nominatim' | 'torob' | 'digikala';

/**
 * What a fake answers. `ok` replays the recorded search sample, `empty` a well-formed empty
 * answer, `hang` never answers (for timeouts), the rest replay the providers' error bodies.
 */
export type Scenario =
  | 'ok'
  | 'empty'
  | 'hang'
  | 'error-400'
  | 'error-401'
  | 'error-429'
  | 'failed-200'
  | 'forbidden'
  | 'error-480'
  | 'error-481'
  | 'error-482'
  | 'error-484'
  | 'error-485'
  | 'v3'
  | 'captcha'
  | 'full-card'
  | 'error-400-in-200'
  | 'error-429-in-200'
  | 'cookie-challenge'
  | 'cookie-challenge-forever'
  /** HTTP 200 with a JSON body that has no result list (a changed API). */
  | 'shape-changed'
  /** Closes the connection under the next request, before any answer, then answers `ok`. */
  | 'reset-once';

export interface RecordedRequest {
  readonly provider: FakeProvider;
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

export interface FakeToolProviders {
  /** Base URL of one provider, e.g. `http://127.0.0.1:PORT/neshan` (a path prefix, as a proxy would have). */
  baseUrl(provider: FakeProvider): string;
  /** Sets what a provider answers from now on (default `ok`). */
  set(provider: FakeProvider, scenario: Scenario): void;
  /** Every request received, oldest first. */
  readonly requests: RecordedRequest[];
  requestsTo(provider: FakeProvider): RecordedRequest[];
  /** How many `hang` requests the client gave up on (closed the connection). */
  hungUp(): number;
  close(): Promise<void>;
}

type Reply = { status: number; body: string; type?: string; headers?: Record<string, string> } | 'hang';

const json = (status: number, body: string): Reply => ({ status, body });

// The Agent API's web_search tool: its documented fields and filters (docs.perplexity.ai, Agent
// API, Tools); the API refuses any other field with a 400 naming it (perplexity-error-400.json).
const PERPLEXITY_TOOL_FIELDS = ['type', 'filters', 'user_location'];
const PERPLEXITY_FILTERS = [
  'search_domain_filter',
  'search_language_filter',
  'search_recency_filter',
  'search_after_date',
  'search_before_date',
  'max_tokens_per_page',
];

function perplexityUnknownField(tool: Record<string, unknown>): string | undefined {
  const field = Object.keys(tool).find((k) => !PERPLEXITY_TOOL_FIELDS.includes(k));
  if (field !== undefined) return field;
  const filters = (tool['filters'] ?? {}) as Record<string, unknown>;
  const filter = Object.keys(filters).find((k) => !PERPLEXITY_FILTERS.includes(k));
  if (filter !== undefined) return filter;
  const recency = filters['search_recency_filter'];
  if (recency !== undefined && !['hour', 'day', 'week', 'month', 'year'].includes(String(recency)))
    return 'search_recency_filter';
  const domains = filters['search_domain_filter'];
  if (domains !== undefined && (!Array.isArray(domains) || domains.length > 20)) return 'search_domain_filter';
  const languages = filters['search_language_filter'];
  if (languages !== undefined && (!Array.isArray(languages) || languages.length > 10)) return 'search_language_filter';
  return undefined;
}

function perplexityUnknown(field: string): string {
  const error = JSON.parse(sample('perplexity-error-400.json')) as { error: Record<string, unknown> };
  error.error['message'] = `invalid request body: json: unknown field "${field}"`;
  error.error['param'] = field;
  return JSON.stringify(error);
}

function perplexity(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.method !== 'POST' || req.path !== '/v1/agent')
    return json(404, '{"error":{"message":"Not Found","type":"not_found","code":404}}');
  if (req.headers['authorization'] !== 'Bearer pplx-test-key') return json(401, sample('perplexity-error-401.json'));
  const body = JSON.parse(req.body) as { input?: unknown; tools?: Array<Record<string, unknown>> };
  if (typeof body.input !== 'string' || body.tools?.[0]?.['type'] !== 'web_search')
    return json(400, sample('perplexity-error-400.json'));
  const unknown = perplexityUnknownField(body.tools[0]);
  if (unknown !== undefined) return json(400, perplexityUnknown(unknown));
  switch (scenario) {
    case 'ok':
      return json(200, sample('perplexity-agent.json'));
    case 'empty': {
      const agent = JSON.parse(sample('perplexity-agent.json')) as {
        output: Array<{ type: string; results?: unknown[] }>;
      };
      agent.output = agent.output.map((o) => (o.type === 'search_results' ? { ...o, results: [] } : o));
      return json(200, JSON.stringify(agent));
    }
    case 'failed-200':
      return json(200, sample('perplexity-agent-failed-200.json'));
    case 'error-400':
      return json(400, sample('perplexity-error-400.json'));
    case 'error-401':
      return json(401, sample('perplexity-error-401.json'));
    case 'error-429':
      return json(429, sample('perplexity-error-429.json'));
    default:
      return 'hang';
  }
}

function searxng(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.path !== '/search') return { status: 404, body: 'Not Found', type: 'text/html' };
  if (req.query.get('format') !== 'json') return { status: 200, body: '<html></html>', type: 'text/html' };
  if ((req.query.get('q') ?? '') === '') return json(400, sample('searxng-error-400.json'));
  // SearXNG refuses a time_range outside its list (searx/webadapter.py) with a 400.
  const timeRange = req.query.get('time_range');
  if (timeRange !== null && !['day', 'week', 'month', 'year'].includes(timeRange))
    return json(400, JSON.stringify({ error: 'Invalid value "time_range"' }));
  switch (scenario) {
    case 'ok':
      return json(200, sample('searxng.json'));
    case 'empty':
      return json(
        200,
        JSON.stringify({
          query: req.query.get('q'),
          results: [],
          answers: [],
          corrections: [],
          infoboxes: [],
          suggestions: [],
          unresponsive_engines: [],
        }),
      );
    case 'error-400':
      return json(400, sample('searxng-error-400.json'));
    case 'forbidden':
      // What SearXNG answers when `json` is not in search.formats.
      return { status: 403, body: '<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>', type: 'text/html' };
    default:
      return 'hang';
  }
}

function neshan(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.path !== '/v1/search') return json(404, '{"status":"ERROR","code":404,"message":"Not Found"}');
  if (req.headers['api-key'] !== 'neshan-test-key') return json(480, sample('neshan-error-480.json'));
  if (!req.query.get('term') || !req.query.get('lat') || !req.query.get('lng'))
    return json(470, '{"status":"ERROR","code":470,"message":"CoordinateParseError"}');
  const errors: Partial<Record<Scenario, number>> = {
    'error-480': 480,
    'error-481': 481,
    'error-482': 482,
    'error-484': 484,
    'error-485': 485,
  };
  const code = errors[scenario];
  if (code !== undefined) return json(code, sample(`neshan-error-${code}.json`));
  switch (scenario) {
    case 'ok':
      return json(200, sample('neshan-search.json'));
    case 'v3':
      return json(200, sample('neshan-search-v3.json'));
    case 'empty':
      return json(200, '{"count":0,"items":[]}');
    default:
      return 'hang';
  }
}

function nominatim(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.path !== '/search') return json(404, '{"error":{"code":404,"message":"Not Found"}}');
  const viewbox = (req.query.get('viewbox') ?? '').split(',');
  if (viewbox.length !== 4 || viewbox.some((v) => !Number.isFinite(Number(v))))
    return json(400, sample('nominatim-error-400.json'));
  if (
    req.query.get('countrycodes') !== 'ir' ||
    req.query.get('bounded') !== '1' ||
    req.query.get('format') !== 'jsonv2'
  ) {
    return json(400, '{"error":{"code":400,"message":"fake: expected countrycodes=ir, bounded=1, format=jsonv2"}}');
  }
  switch (scenario) {
    case 'ok':
      return json(200, sample('nominatim-search.json'));
    case 'empty':
      return json(200, sample('nominatim-search-empty.json'));
    case 'error-400':
      return json(400, sample('nominatim-error-400.json'));
    case 'error-400-in-200':
      return json(200, sample('nominatim-reverse-error.json'));
    default:
      return 'hang';
  }
}

function torob(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.path !== '/v4/base-product/search/') return json(404, '{"detail":"Not found."}');
  switch (scenario) {
    case 'ok':
      return json(200, sample('torob-search.json'));
    case 'empty':
      return json(200, '{"results":[],"next":null}');
    case 'captcha':
      return { status: 490, body: sample('torob-error-490-captcha.html'), type: 'text/html; charset=utf-8' };
    default:
      return 'hang';
  }
}

const DIGIKALA_COOKIE = 'tracker_glob_new=fake-challenge-cookie';

function digikala(scenario: Scenario, req: RecordedRequest): Reply {
  if (req.path !== '/v1/search/') return json(404, sample('digikala-error-404.json'));
  const challenge = (): Reply => ({
    status: 307,
    body: '',
    headers: { location: req.path, 'set-cookie': `${DIGIKALA_COOKIE}; Path=/; HttpOnly` },
  });
  switch (scenario) {
    case 'ok':
      return json(200, sample('digikala-search.json'));
    case 'full-card':
      return json(200, sample('digikala-search-full-card.json'));
    case 'empty':
      return json(
        200,
        '{"status":200,"data":{"products":[],"pager":{"current_page":1,"total_pages":0,"total_items":0}}}',
      );
    case 'error-400-in-200':
      return json(200, sample('digikala-error-400.json'));
    case 'error-429-in-200':
      return json(200, sample('digikala-error-429.json'));
    case 'cookie-challenge':
      return req.headers['cookie']?.includes(DIGIKALA_COOKIE) === true
        ? json(200, sample('digikala-search.json'))
        : challenge();
    case 'cookie-challenge-forever':
      return challenge();
    default:
      return 'hang';
  }
}

const HANDLERS: Record<FakeProvider, (scenario: Scenario, req: RecordedRequest) => Reply> = {
  perplexity,
  searxng,
  neshan,
  nominatim,
  torob,
  digikala,
};

/** Starts one HTTP server on 127.0.0.1:0 that plays all six tool providers, each under its own path prefix. */
export async function startFakeToolProviders(): Promise<FakeToolProviders> {
  const scenarios = new Map<FakeProvider, Scenario>();
  const requests: RecordedRequest[] = [];
  let hungUp = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const [, prefix = '', ...rest] = url.pathname.split('/');
      const provider = prefix as FakeProvider;
      const handler = HANDLERS[provider];
      if (handler === undefined) {
        res.writeHead(404).end();
        return;
      }
      const recorded: RecordedRequest = {
        provider,
        method: req.method ?? 'GET',
        path: `/${rest.join('/')}`,
        query: url.searchParams,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(recorded);
      const scenario = scenarios.get(provider) ?? 'ok';
      if (scenario === 'reset-once') {
        scenarios.set(provider, 'ok');
        req.socket.destroy();
        return;
      }
      const reply =
        scenario === 'shape-changed' ? json(200, '{"status":200,"unexpected":true}') : handler(scenario, recorded);
      if (reply === 'hang') {
        res.once('close', () => hungUp++);
        return;
      }
      res.writeHead(reply.status, { 'content-type': reply.type ?? 'application/json', ...reply.headers });
      res.end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: (provider) => `http://127.0.0.1:${port}/${provider}`,
    set: (provider, scenario) => void scenarios.set(provider, scenario),
    requests,
    requestsTo: (provider) => requests.filter((r) => r.provider === provider),
    hungUp: () => hungUp,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
