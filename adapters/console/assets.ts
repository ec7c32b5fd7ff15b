// The console's only stylesheet and script, served from memory: nothing is fetched from a CDN,
// so the console works on a closed network.

export const CONSOLE_CSS = `
:root {
  --bg: #f6f7f9; --panel: #fff; --text: #16181d; --muted: #5d6472; --line: #e3e6eb;
  --accent: #4f46e5; --accent-ink: #fff; --accent-soft: #eef0ff;
  --ok: #0f7b4d; --ok-soft: #e6f6ee; --warn: #8a5a00; --warn-soft: #fff6e0;
  --bad: #b42318; --bad-soft: #fdecea; --radius: 10px;
  --font: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans Arabic", Vazirmatn, Tahoma, sans-serif;
  --focus: #4338ca; --control: #6b7380; --input-bg: #fff; --th-bg: #fafbfc; --quiet-bg: #fff; --off-bg: #eef0f3;
  --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace;
}
/* Persian: system fonts that carry the script well (no web font is downloaded). */
html[lang="fa"] { --font: Vazirmatn, Tahoma, "Segoe UI", sans-serif; }
/* Letter spacing would break the joined letters of the Persian script. */
html[lang="fa"] * { letter-spacing: 0 !important; }
/* Identifiers, keys, code and signed amounts read left to right inside Persian text too. */
span.mono, code, pre, .plus, .minus { direction: ltr; unicode-bidi: isolate; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--text); font: 15px/1.5 var(--font); }
a { color: var(--accent); }
a:hover { text-decoration: none; }
/* Focus rings and control borders at 3:1 or more against what is around them (WCAG 2.2 1.4.11). */
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; border-radius: 4px; }
.side :focus-visible { outline-color: #a5b4fc; }
.skip { position: absolute; inset-inline-start: -999px; top: 8px; background: var(--panel); padding: 8px 12px; z-index: 10; }
.skip:focus { inset-inline-start: 8px; }
.visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }

.shell { display: grid; grid-template-columns: 232px 1fr; min-height: 100vh; }
.side { background: #111827; color: #e5e7eb; padding: 20px 14px; display: flex; flex-direction: column; gap: 18px; }
.brand { display: flex; align-items: center; gap: 10px; font-weight: 700; font-size: 17px; color: #fff; text-decoration: none; padding: 0 8px; }
.brand-mark { width: 28px; height: 28px; border-radius: 8px; background: linear-gradient(135deg, #6366f1, #22d3ee); display: grid; place-items: center; font-size: 14px; color: #fff; }
.nav { display: flex; flex-direction: column; gap: 2px; }
.nav a { color: #cbd5e1; text-decoration: none; padding: 8px 10px; border-radius: 8px; font-weight: 500; }
.nav a:hover { background: #1f2937; color: #fff; }
.nav a[aria-current="page"] { background: #312e81; color: #fff; }
.side-foot { margin-top: auto; font-size: 13px; color: #9ca3af; padding: 0 8px; display: flex; flex-direction: column; gap: 8px; }
.side-foot strong { color: #e5e7eb; font-weight: 600; overflow-wrap: anywhere; }
.lang { display: flex; gap: 4px; flex-wrap: wrap; font-size: 13px; }
.lang a { color: #c7d2fe; }
.lang a[aria-current] { font-weight: 700; text-decoration: none; color: #fff; }
.auth-card .lang { justify-content: center; margin-bottom: 14px; }
.auth-card .lang a { color: var(--accent); }
.auth-card .lang a[aria-current] { color: var(--text); }
.link-button { background: none; border: 0; padding: 0; color: #c7d2fe; font: inherit; cursor: pointer; text-decoration: underline; }

main { padding: 28px 36px 48px; max-width: 1160px; width: 100%; min-width: 0; }
.page-head { display: flex; align-items: flex-end; justify-content: space-between; gap: 16px; flex-wrap: wrap; margin-bottom: 20px; }
h1 { font-size: 24px; line-height: 1.25; margin: 0; }
h2 { font-size: 17px; margin: 0 0 12px; }
.lede { color: var(--muted); margin: 4px 0 0; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 20px; margin-bottom: 20px; }
.panel > :last-child { margin-bottom: 0; }
.grid { display: grid; gap: 16px; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); margin-bottom: 20px; }
.stat { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 16px 18px; }
.stat-label { color: var(--muted); font-size: 13px; }
.stat-value { font-size: 24px; font-weight: 700; margin-top: 2px; font-variant-numeric: tabular-nums; }
.stat-value small { font-size: 14px; font-weight: 500; color: var(--muted); }

.alert .detail { font-size: 13px; opacity: .95; }
.alert { border-radius: 8px; padding: 12px 14px; margin-bottom: 18px; border: 1px solid; }
.alert-error { background: var(--bad-soft); border-color: #f5c2bd; color: var(--bad); }
.alert-ok { background: var(--ok-soft); border-color: #b7e4cc; color: var(--ok); }
.alert-warn { background: var(--warn-soft); border-color: #f3d99a; color: var(--warn); }

form.inline { display: flex; gap: 10px; align-items: flex-end; flex-wrap: wrap; }
.field { display: flex; flex-direction: column; gap: 5px; margin-bottom: 14px; min-width: 0; }
form.inline .field { margin-bottom: 0; }
label { font-weight: 600; font-size: 14px; }
.hint { color: var(--muted); font-size: 13px; font-weight: 400; }
input, select { font: inherit; color: inherit; padding: 9px 11px; border: 1px solid var(--control); border-radius: 8px; background: var(--input-bg); min-width: 0; }
input:focus, select:focus { border-color: var(--accent); outline: 3px solid var(--focus); outline-offset: 0; }
.btn { display: inline-flex; align-items: center; gap: 6px; font: inherit; font-weight: 600; padding: 9px 16px; border-radius: 8px; border: 1px solid var(--accent); background: var(--accent); color: var(--accent-ink); cursor: pointer; text-decoration: none; white-space: nowrap; }
.btn:hover { filter: brightness(1.08); }
.btn-quiet { background: var(--quiet-bg); color: var(--text); border-color: var(--control); }
.btn-danger { background: var(--bad); border-color: var(--bad); }
.btn-small { padding: 5px 10px; font-size: 13px; }

.table-wrap { overflow-x: auto; position: relative; }
table { width: 100%; border-collapse: collapse; font-size: 14px; }
th, td { text-align: start; padding: 10px 12px; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; background: var(--th-bg); }
tr:last-child td { border-bottom: 0; }
td.num, th.num { text-align: end; font-variant-numeric: tabular-nums; white-space: nowrap; }
.mono, code { font-family: var(--mono); font-size: 13px; }
.empty { color: var(--muted); text-align: center; padding: 28px 12px; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; }
.badge-ok { background: var(--ok-soft); color: var(--ok); }
.badge-off { background: var(--off-bg); color: var(--muted); }
.badge-bad { background: var(--bad-soft); color: var(--bad); }
.badge-warn { background: var(--warn-soft); color: var(--warn); }
.plus { color: var(--ok); } .minus { color: var(--bad); }
.pager { display: flex; gap: 8px; justify-content: flex-end; margin-top: 12px; }
.pager:empty { display: none; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 8px 20px; margin: 0; }
.facts dt { color: var(--muted); font-weight: 600; }
.facts dd { margin: 0; }
.activity { list-style: none; margin: 0; padding: 0; }
.activity li { display: flex; flex-wrap: wrap; gap: 4px 12px; padding: 8px 0; border-bottom: 1px solid var(--line); }
.activity li:last-child { border-bottom: 0; }
.activity time { color: var(--muted); font-variant-numeric: tabular-nums; }
.plain { list-style: none; margin: 0; padding: 0; }
.big { font-size: 20px; font-weight: 600; margin: 4px 0; }

.secret { display: flex; gap: 10px; align-items: stretch; flex-wrap: wrap; margin: 12px 0; }
.secret code { flex: 1 1 320px; background: #0b1020; color: #e0e7ff; padding: 12px 14px; border-radius: 8px; overflow-wrap: anywhere; font-size: 14px; }
.snippet { position: relative; margin: 8px 0 0; }
.snippet pre { background: #0b1020; color: #e0e7ff; padding: 14px 84px 14px 16px; border-radius: 8px; overflow-x: auto; margin: 0; font-size: 13px; line-height: 1.55; }
.snippet .btn { position: absolute; top: 8px; inset-inline-end: 8px; }
.tabs { display: grid; gap: 18px; grid-template-columns: minmax(0, 1fr); }
.tabs .panel { margin: 0; }
.panel h2 small { color: var(--muted); font-weight: 400; font-size: 13px; }

.chart { margin: 0; }
.nowrap { white-space: nowrap; }
.chart svg { width: 100%; height: auto; display: block; }
.legend { display: flex; flex-wrap: wrap; gap: 8px 18px; list-style: none; padding: 0; margin: 12px 0 0; font-size: 13px; }
.legend li { display: flex; align-items: center; gap: 6px; }
.swatch { width: 12px; height: 12px; border-radius: 3px; display: inline-block; }
details summary { cursor: pointer; color: var(--accent); font-weight: 600; margin-top: 12px; }

.auth { min-height: 100vh; display: grid; place-items: center; padding: 24px 16px; }
.auth-card { width: 100%; max-width: 420px; }
.auth-card .brand { color: var(--text); justify-content: center; margin-bottom: 18px; font-size: 20px; }
.auth-card .panel { padding: 26px; }
.auth-card .btn { width: 100%; justify-content: center; }
.auth-card input { width: 100%; }
.fine { color: var(--muted); font-size: 13px; text-align: center; margin-top: 14px; }

.sw-0 { fill: #6366f1; background: #6366f1; } .sw-1 { fill: #06b6d4; background: #06b6d4; }
.sw-2 { fill: #f59e0b; background: #f59e0b; } .sw-3 { fill: #10b981; background: #10b981; }
.sw-4 { fill: #ef4444; background: #ef4444; } .sw-5 { fill: #8b5cf6; background: #8b5cf6; }
.sw-6 { fill: #ec4899; background: #ec4899; } .sw-7 { fill: #64748b; background: #64748b; }
.axis { fill: var(--muted); font-size: 11px; font-family: var(--font); }
.gridline { stroke: var(--line); stroke-width: 1; }

@media (prefers-color-scheme: dark) {
  :root {
    color-scheme: dark;
    --bg: #0d1117; --panel: #161b22; --text: #e6edf3; --muted: #a3adba; --line: #30363d;
    --accent: #a5b4fc; --accent-ink: #0d1117; --accent-soft: #1e2340;
    --ok: #6ee7a8; --ok-soft: #0f2a1d; --warn: #f5c86b; --warn-soft: #2b2110;
    --bad: #ff9b90; --bad-soft: #33140f;
    --focus: #c7d2fe; --control: #8b949e; --input-bg: #0d1117; --th-bg: #1c2129; --quiet-bg: #21262d; --off-bg: #262c36;
  }
  .alert-error { border-color: #8c2f25; } .alert-ok { border-color: #1f6b45; } .alert-warn { border-color: #7a5a14; }
  .btn-danger { color: #0d1117; }
}

/* Tables become cards on a phone: each row a block, each cell labelled by its column. */
@media (max-width: 600px) {
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  table.cards tr { border: 1px solid var(--line); border-radius: var(--radius); padding: 8px 12px; margin-bottom: 10px; }
  table.cards td { border: 0; padding: 4px 0; text-align: start; white-space: normal; overflow-wrap: anywhere; }
  table.cards td.hide-narrow { display: none; }
  table.cards td[data-label]::before { content: attr(data-label); display: block; color: var(--muted); font-size: 12px; font-weight: 600; text-transform: uppercase; letter-spacing: .04em; }
  table.cards td.empty { text-align: center; }
}

@media (max-width: 820px) {
  .shell { grid-template-columns: minmax(0, 1fr); }
  .side { flex-direction: row; flex-wrap: wrap; align-items: center; padding: 12px 14px; gap: 10px; position: sticky; top: 0; z-index: 5; }
  .nav { flex-direction: row; flex-wrap: wrap; gap: 2px; order: 3; width: 100%; }
  .nav a { padding: 6px 9px; font-size: 14px; }
  .side-foot { margin: 0; margin-inline-start: auto; flex-direction: row; align-items: center; }
  .side-foot .who { display: none; }
  main { padding: 20px 16px 40px; }
  h1 { font-size: 21px; }
  .hide-narrow { display: none; }
}
`;

export const CONSOLE_JS = `
(function () {
  function copy(button) {
    var target = document.getElementById(button.getAttribute('data-copy'));
    if (!target) return;
    var text = target.textContent || '';
    var done = function () {
      var label = button.textContent;
      button.textContent = button.getAttribute('data-copied') || 'Copied';
      button.setAttribute('aria-live', 'polite');
      setTimeout(function () { button.textContent = label; }, 1600);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { select(target); });
    } else {
      select(target);
      try { document.execCommand('copy'); done(); } catch (e) { /* the text stays selected */ }
    }
  }
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  document.addEventListener('click', function (event) {
    var button = event.target.closest && event.target.closest('[data-copy]');
    if (button) { event.preventDefault(); copy(button); }
  });
  document.querySelectorAll('[data-copy]').forEach(function (b) { b.hidden = false; });
  // A POST form is sent once per page: a second click (a double click, an impatient one) while the
  // first submission is on its way sends nothing, so the page the browser lands on is the first
  // submission's, the one that shows a new key's secret. The core makes one key per form id
  // however often it is posted; this keeps the browser from racing its own two answers. The
  // guard lifts after a while (a submission that never answered may be sent again) and when the
  // page comes back from the back-forward cache.
  document.addEventListener('submit', function (event) {
    var form = event.target;
    // POST forms only: a GET form (a filter, a CSV download) may be sent again at once.
    if (!form || !form.getAttribute || String(form.method).toLowerCase() !== 'post') return;
    if (form.getAttribute('data-sent') === '1') { event.preventDefault(); return; }
    form.setAttribute('data-sent', '1');
    setTimeout(function () { form.removeAttribute('data-sent'); }, 15000);
  });
  window.addEventListener('pageshow', function () {
    document.querySelectorAll('form[data-sent]').forEach(function (f) { f.removeAttribute('data-sent'); });
  });
})();
`;
