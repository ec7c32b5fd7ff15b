import type { ConsoleModelPrice, ConsoleToolPrice } from '../../../gen/svc/core/v1/console';
import { groupDigits, toman } from '../format';
import { html, type Html } from '../html';
import { page, type Viewer } from '../layout';

const TOOL_LABELS: Readonly<Record<string, string>> = {
  web_search: 'Web search',
  maps_search_places: 'Places search (maps)',
  shopping_search: 'Shopping search',
};

function toolPrice(t: ConsoleToolPrice): Html {
  if (t.flat > 0n || (t.inputPer1m === 0n && t.outputPer1m === 0n))
    return html`${toman(t.flat)} <span class="hint">per successful call</span>`;
  return html`${toman(t.inputPer1m)} in / ${toman(t.outputPer1m)} out
    <span class="hint">per 1M tokens, at most ${toman(t.cap)} a call</span>`;
}

/** What each model and tool costs, straight from the running configuration. */
export function pricesPage(input: {
  viewer: Viewer;
  models: readonly ConsoleModelPrice[];
  tools: readonly ConsoleToolPrice[];
}): Html {
  return page({
    title: 'Prices',
    path: '/console/prices',
    viewer: input.viewer,
    lede: 'What a request costs, in toman (1 credit = 1 toman). A failed call or an empty answer costs nothing.',
    body: html`<section class="panel" aria-labelledby="models-heading">
        <h2 id="models-heading">Models <small>per one million tokens</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Model prices, scrollable">
          <table data-testid="model-prices">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col" class="num">Input</th>
                <th scope="col" class="num">Output</th>
                <th scope="col" class="num">Context window</th>
              </tr>
            </thead>
            <tbody>
              ${input.models.map(
                (m) => html`<tr>
                  <td class="mono">${m.id}</td>
                  <td class="num">${toman(m.inputPer1m)}</td>
                  <td class="num">${toman(m.outputPer1m)}</td>
                  <td class="num">${groupDigits(m.contextWindow)} tokens</td>
                </tr>`,
              )}
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="tools-heading">
        <h2 id="tools-heading">Tools <small>through the MCP server</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Tool prices, scrollable">
          <table data-testid="tool-prices">
            <thead>
              <tr>
                <th scope="col">Tool</th>
                <th scope="col" class="num">Price</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.tools.length === 0
                  ? html`<tr>
                      <td colspan="2" class="empty">This deployment offers no tools.</td>
                    </tr>`
                  : input.tools.map(
                      (t) => html`<tr>
                        <td>${TOOL_LABELS[t.name] ?? t.name} <span class="mono hint">${t.name}</span></td>
                        <td class="num">${toolPrice(t)}</td>
                      </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
      </section>`,
  });
}
