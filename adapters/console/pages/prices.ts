import type { Context } from 'koa';
import { TOOL_CATALOG } from '../../../core';
import { asSession, callCore, send, signedOf, type Core } from '../context';
import { toman } from '../format';
import { html, type Html } from '../html';
import { t, type Locale } from '../i18n';
import { page, type Viewer } from '../layout';

/** A model's price per one million tokens (credits), and its context window. */
export interface ModelPrice {
  readonly id: string;
  readonly inputPer1m: bigint;
  readonly outputPer1m: bigint;
  readonly contextWindow: bigint;
  /** A media model's unit prices (SPEC §14); absent or empty for a model priced by tokens. */
  readonly units?: readonly UnitPriceView[];
}

/** One unit price of a media model: the credits, and what they buy (ModelService's `UnitPrice`). */
export interface UnitPriceView {
  readonly credits: bigint;
  readonly per: string;
  readonly size: string;
  readonly quality: string;
}

/** What a unit price buys, in the viewer's words: "per image, 1024×1024 high", "per minute". */
export function unitWords(l: Locale, u: UnitPriceView): string {
  switch (u.per) {
    case 'image': {
      const size = u.size === 'auto' || u.size === '' ? t(l, 'prices.anySize') : u.size.replace('x', '×');
      const quality = u.quality === 'auto' || u.quality === '' ? '' : ` ${u.quality}`;
      return t(l, 'prices.perImage', { what: `${size}${quality}` });
    }
    case 'minute':
      return t(l, 'prices.perMinute');
    case '1m_characters':
      return t(l, 'prices.perMillionCharacters');
    case 'search':
      return t(l, 'prices.perSearch');
    default:
      return u.per;
  }
}

/** A media model's price cells: its unit prices where the token prices would be. */
function unitCells(l: Locale, units: readonly UnitPriceView[]): Html {
  return html`<td data-label="${t(l, 'prices.price')}" colspan="2" class="num" data-testid="unit-prices">
    ${units.map((u, i) => html`${i === 0 ? '' : html`<br />`}${toman(u.credits, l)} <span class="hint">${unitWords(l, u)}</span>`)}
  </td>`;
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
}): Html {
  const l = input.viewer.locale;
  return page({
    title: t(l, 'prices.title'),
    path: '/console/prices',
    viewer: input.viewer,
    lede: t(l, 'prices.lede'),
    body: html`<section class="panel" aria-labelledby="models-heading">
        <h2 id="models-heading">${t(l, 'prices.models')} <small>${t(l, 'prices.modelsHint')}</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'prices.modelsRegion')}">
          <table class="cards" data-testid="model-prices">
            <thead>
              <tr>
                <th scope="col">${t(l, 'prices.model')}</th>
                <th scope="col" class="num">${t(l, 'prices.input')}</th>
                <th scope="col" class="num">${t(l, 'prices.output')}</th>
                <th scope="col" class="num">${t(l, 'prices.context')}</th>
              </tr>
            </thead>
            <tbody>
              ${input.models.map(
                (m) =>
                  html`<tr>
                    <td data-label="${t(l, 'prices.model')}" class="mono">${m.id}</td>
                    ${
                      m.units !== undefined && m.units.length > 0
                        ? unitCells(l, m.units)
                        : html`<td data-label="${t(l, 'prices.input')}" class="num">${toman(m.inputPer1m, l)}</td>
                            <td data-label="${t(l, 'prices.output')}" class="num">${toman(m.outputPer1m, l)}</td>`
                    }
                    <td data-label="${t(l, 'prices.context')}" class="num">
                      ${t(l, 'prices.tokens', { n: m.contextWindow })}
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

/** GET /console/prices: every model's and tool's price, from the running configuration. */
export async function showPrices(ctx: Context, core: Pick<Core, 'models' | 'tools'>): Promise<void> {
  const s = signedOf(ctx);
  const m = asSession(ctx);
  const [{ models }, { tools }] = await Promise.all([
    callCore(m, (o) => core.models.listModels({}, o)),
    callCore(m, (o) => core.tools.listTools({}, o)),
  ]);
  send(
    ctx,
    200,
    pricesPage({
      viewer: s.viewer,
      // Aliases are listed by ModelService as models of their own; the page lists each model once.
      models: models
        .filter((model) => model.aliasOf === '')
        .map((model) => ({
          id: model.id,
          inputPer1m: model.price?.inputPer1m ?? 0n,
          outputPer1m: model.price?.outputPer1m ?? 0n,
          contextWindow: model.contextWindow,
          units: model.unitPrices,
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
