import { calendarDay, num, toman } from './format';
import { html, type Html } from './html';
import { t, type Locale } from './i18n';

export interface DailySpend {
  readonly day: string;
  readonly resource: string;
  readonly cost: bigint;
  readonly requests: bigint;
}

const WIDTH = 760;
const HEIGHT = 260;
const LEFT = 64;
const BOTTOM = 28;
const TOP = 12;
const PALETTE_SIZE = 8;

function days(last: string, count: number): string[] {
  const end = Date.parse(`${last}T00:00:00Z`);
  return Array.from({ length: count }, (_, i) =>
    new Date(end - (count - 1 - i) * 86_400_000).toISOString().slice(0, 10),
  );
}

/** A round axis maximum (1, 2 or 5 × 10^n) at or above `max`. */
function niceMax(max: bigint): bigint {
  if (max <= 0n) return 10n;
  let step = 1n;
  while (step * 10n <= max) step *= 10n;
  for (const m of [1n, 2n, 5n, 10n]) if (step * m >= max) return step * m;
  return step * 10n;
}

/**
 * Daily spend as a stacked bar chart in inline SVG, one colour per model or tool, with a legend
 * and the same numbers as a table for screen readers. Drawn on the server: no script, no library.
 */
export function spendChart(rows: readonly DailySpend[], input: { today: string; days: number; locale: Locale }): Html {
  const l = input.locale;
  const dayList = days(input.today, input.days);
  const resources = [...new Set(rows.map((r) => r.resource))].sort();
  const colour = (resource: string): number => resources.indexOf(resource) % PALETTE_SIZE;
  const byDay = new Map<string, DailySpend[]>();
  for (const row of rows) byDay.set(row.day, [...(byDay.get(row.day) ?? []), row]);
  const totals = dayList.map((d) => (byDay.get(d) ?? []).reduce((sum, r) => sum + r.cost, 0n));
  const top = niceMax(totals.reduce((a, b) => (b > a ? b : a), 0n));
  const plotW = WIDTH - LEFT - 8;
  const plotH = HEIGHT - TOP - BOTTOM;
  const slot = plotW / dayList.length;
  const barW = Math.max(4, Math.min(36, slot * 0.62));
  const y = (value: bigint): number => (Number(value) / Number(top)) * plotH;
  const ticks = [0n, top / 4n, top / 2n, (top * 3n) / 4n, top];
  const total = totals.reduce((a, b) => a + b, 0n);

  const bars = dayList.map((day, i) => {
    let base = 0n;
    const x = LEFT + i * slot + (slot - barW) / 2;
    const segments = (byDay.get(day) ?? [])
      .filter((r) => r.cost > 0n)
      .map((r) => {
        const y0 = TOP + plotH - y(base + r.cost);
        const h = Math.max(1, y(r.cost));
        base += r.cost;
        return html`<rect
          class="sw-${colour(r.resource)}"
          x="${x.toFixed(1)}"
          y="${y0.toFixed(1)}"
          width="${barW.toFixed(1)}"
          height="${h.toFixed(1)}"
          rx="2"
          ><title>${t(l, 'chart.bar', { day: calendarDay(l, day), what: r.resource, cost: toman(r.cost, l), n: r.requests })}</title></rect
        >`;
      });
    const label =
      i % Math.ceil(dayList.length / 10) === 0 || i === dayList.length - 1
        ? html`<text class="axis" x="${(x + barW / 2).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="middle"
            >${calendarDay(l, day).slice(5)}</text
          >`
        : html``;
    return html`${segments}${label}`;
  });

  // The time axis runs left to right in both languages, as charts do in Persian too.
  return html`<figure class="chart" aria-labelledby="chart-caption">
    <svg dir="ltr" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-caption" focusable="false">
      ${ticks.map((tick) => {
        const ty = TOP + plotH - y(tick);
        return html`<line
            class="gridline"
            x1="${LEFT}"
            x2="${WIDTH - 8}"
            y1="${ty.toFixed(1)}"
            y2="${ty.toFixed(1)}"
          /><text class="axis" x="${LEFT - 8}" y="${(ty + 4).toFixed(1)}" text-anchor="end">${num(l, tick)}</text>`;
      })}
      ${bars}
    </svg>
    <figcaption id="chart-caption" class="visually-hidden">
      ${t(l, 'chart.caption', { from: calendarDay(l, dayList[0] ?? input.today), to: calendarDay(l, input.today), total: toman(total, l) })}
    </figcaption>
    ${
      resources.length === 0
        ? html`<p class="hint">${t(l, 'chart.none')}</p>`
        : html`<ul class="legend">
            ${resources.map((r) => html`<li><span class="swatch sw-${colour(r)}" aria-hidden="true"></span><span dir="auto">${r}</span></li>`)}
          </ul>`
    }
    <details>
      <summary>${t(l, 'chart.asTable')}</summary>
      <div class="table-wrap">
        <table class="cards">
          <caption class="visually-hidden">
            ${t(l, 'chart.tableCaption')}
          </caption>
          <thead>
            <tr>
              <th scope="col">${t(l, 'chart.day')}</th>
              <th scope="col">${t(l, 'chart.what')}</th>
              <th scope="col" class="num">${t(l, 'chart.requests')}</th>
              <th scope="col" class="num">${t(l, 'chart.spend')}</th>
            </tr>
          </thead>
          <tbody>
            ${
              rows.length === 0
                ? html`<tr>
                    <td colspan="4" class="empty">${t(l, 'chart.empty')}</td>
                  </tr>`
                : rows.map(
                    (r) =>
                      html`<tr>
                        <td data-label="${t(l, 'chart.day')}">${calendarDay(l, r.day)}</td>
                        <td data-label="${t(l, 'chart.what')}" dir="auto">${r.resource}</td>
                        <td data-label="${t(l, 'chart.requests')}" class="num">${num(l, r.requests)}</td>
                        <td data-label="${t(l, 'chart.spend')}" class="num">${toman(r.cost, l)}</td>
                      </tr>`,
                  )
            }
          </tbody>
        </table>
      </div>
    </details>
  </figure>`;
}
