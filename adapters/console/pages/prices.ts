import type { Context } from 'koa';
import { TOOL_CATALOG } from '../../../core/edge';
import { asSession, callCore, send, signedOf, type Core } from '../context';
import { toman } from '../format';
import { html, type Html } from '../html';
import { isMessageKey, t, type Locale } from '../i18n';
import { page, type Viewer } from '../layout';

/** One of a model's prices in force now: its key (`input_per_1m`, `per_image 1024x1024/high`, …), toman, and the dollar price behind it ('' when priced in credits). */
export interface PriceLineView {
  readonly key: string;
  readonly credits: bigint;
  readonly usd: string;
}

/** A model's prices in force now (every price key of its kind), and its context window (0: not a chat model). */
export interface ModelPrice {
  readonly id: string;
  readonly kind: string;
  readonly lines: readonly PriceLineView[];
  readonly contextWindow: bigint;
}

/** An image price's `SIZE/QUALITY` in words: `1024x1024/high` → "1024×1024 high"; `auto` → "any size". */
function imageWords(l: Locale, sizeQuality: string): string {
  const [size = '', quality = ''] = sizeQuality.split('/', 2);
  const what = size === 'auto' || size === '' ? t(l, 'prices.anySize') : size.replace('x', '×');
  return quality === 'auto' || quality === '' ? what : `${what} ${quality}`;
}

/** A price's key in words: `input_per_1m` → "input, per 1M tokens"; `per_image 1024x1024/high` → "per image, 1024×1024 high". */
function priceKeyLabel(l: Locale, key: string): string {
  const [form = '', size = ''] = key.split(' ', 2);
  if (form === 'per_image') return t(l, 'prices.perImage', { what: imageWords(l, size) });
  const name = `price.${form}`;
  return isMessageKey(name) ? t(l, name, { size }) : key;
}

function priceLines(l: Locale, m: ModelPrice): Html {
  if (m.lines.length === 0) return html`${t(l, 'prices.free')}`;
  return html`<ul class="plain">
    ${m.lines.map(
      (line) =>
        html`<li>
          ${toman(line.credits, l)}
          <span class="hint"
            >${priceKeyLabel(l, line.key)}${line.usd === '' ? '' : ` · ${t(l, 'prices.usd', { usd: line.usd })}`}</span
          >
        </li>`,
    )}
  </ul>`;
}

/** A tool's price: flat per call, or per one million tokens up to `cap` a call. */
export interface ToolPrice {
  readonly name: string;
  readonly flat: bigint;
  readonly inputPer1m: bigint;
  readonly outputPer1m: bigint;
  readonly cap: bigint;
}

/** The tool's name in the viewer's language, as its tool module gives it (core/tools/). */
function toolLabel(l: Locale, name: string): string {
  return TOOL_CATALOG.find((tool) => tool.name === name)?.labels[l] ?? name;
}

function toolPrice(l: Locale, p: ToolPrice): Html {
  if (p.flat > 0n || (p.inputPer1m === 0n && p.outputPer1m === 0n))
    return html`${toman(p.flat, l)} <span class="hint">${t(l, 'prices.perCall')}</span>`;
  return html`${t(l, 'prices.inOut', { input: toman(p.inputPer1m, l), output: toman(p.outputPer1m, l) })}
    <span class="hint">${t(l, 'prices.perTokens', { cap: toman(p.cap, l) })}</span>`;
}

/** What each model and tool costs, straight from the running configuration. */
export function pricesPage(input: {
  viewer: Viewer;
  models: readonly ModelPrice[];
  tools: readonly ToolPrice[];
  /** Toman per US dollar in force; 0: none (every model priced in credits). */
  rate: bigint;
}): Html {
  const l = input.viewer.locale;
  const dollarPriced = input.models.some((m) => m.lines.some((line) => line.usd !== ''));
  return page({
    title: t(l, 'prices.title'),
    path: '/console/prices',
    viewer: input.viewer,
    lede:
      dollarPriced && input.rate > 0n
        ? `${t(l, 'prices.lede')} ${t(l, 'prices.rateNote', { rate: input.rate })}`
        : t(l, 'prices.lede'),
    body: html`<section class="panel" aria-labelledby="models-heading">
        <h2 id="models-heading">${t(l, 'prices.models')} <small>${t(l, 'prices.modelsHint')}</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'prices.modelsRegion')}">
          <table class="cards" data-testid="model-prices">
            <thead>
              <tr>
                <th scope="col">${t(l, 'prices.model')}</th>
                <th scope="col">${t(l, 'prices.kind')}</th>
                <th scope="col" class="num">${t(l, 'prices.prices')}</th>
                <th scope="col" class="num">${t(l, 'prices.context')}</th>
              </tr>
            </thead>
            <tbody>
              ${input.models.map(
                (m) =>
                  html`<tr>
                    <td data-label="${t(l, 'prices.model')}" class="mono">${m.id}</td>
                    <td data-label="${t(l, 'prices.kind')}" class="mono">${m.kind}</td>
                    <td data-label="${t(l, 'prices.prices')}" class="num" data-testid="prices-${m.id}">
                      ${priceLines(l, m)}
                    </td>
                    <td data-label="${t(l, 'prices.context')}" class="num">
                      ${m.contextWindow > 0n ? t(l, 'prices.tokens', { n: m.contextWindow }) : '–'}
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="tools-heading">
        <h2 id="tools-heading">${t(l, 'prices.tools')} <small>${t(l, 'prices.toolsHint')}</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'prices.toolsRegion')}">
          <table class="cards" data-testid="tool-prices">
            <thead>
              <tr>
                <th scope="col">${t(l, 'prices.tool')}</th>
                <th scope="col" class="num">${t(l, 'prices.price')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.tools.length === 0
                  ? html`<tr>
                      <td colspan="2" class="empty">${t(l, 'prices.noTools')}</td>
                    </tr>`
                  : input.tools.map(
                      (p) =>
                        html`<tr>
                          <td data-label="${t(l, 'prices.tool')}">
                            ${toolLabel(l, p.name)} <span class="mono hint">${p.name}</span>
                          </td>
                          <td data-label="${t(l, 'prices.price')}" class="num">${toolPrice(l, p)}</td>
                        </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
      </section>`,
  });
}

// ---- the page (routed in ../app.ts) ----

/**
 * GET /console/prices: every model's prices in force now (at the stored rate and the margins,
 * the account's own included: ModelService.ListPrices answers for the session's account) and
 * every tool's price.
 */
export async function showPrices(ctx: Context, core: Pick<Core, 'models' | 'tools'>): Promise<void> {
  const s = signedOf(ctx);
  const m = asSession(ctx);
  const [{ models }, prices, { tools }] = await Promise.all([
    callCore(m, (o) => core.models.listModels({}, o)),
    callCore(m, (o) => core.models.listPrices({}, o)),
    callCore(m, (o) => core.tools.listTools({}, o)),
  ]);
  // ListPrices lists each model once (no aliases); the context window is ListModels'.
  const contextOf = new Map(models.map((model) => [model.id, model.contextWindow]));
  send(
    ctx,
    200,
    pricesPage({
      viewer: s.viewer,
      rate: prices.rate,
      models: prices.models.map((model) => ({
        id: model.id,
        kind: model.kind,
        lines: model.prices.map((line) => ({ key: line.key, credits: line.credits, usd: line.usd })),
        contextWindow: model.kind === 'chat' ? (contextOf.get(model.id) ?? 0n) : 0n,
      })),
      tools: tools.map((tool) => ({
        name: tool.name,
        flat: tool.price?.flat ?? 0n,
        inputPer1m: tool.price?.inputPer1m ?? 0n,
        outputPer1m: tool.price?.outputPer1m ?? 0n,
        cap: tool.price?.cap ?? 0n,
      })),
    }),
  );
}
