// Tables shared by several pages: the job's table endpoint as HTML, and a
// sortable table (click or Enter on a column header; aria-sort says the order).
import {h, mount, toast, copyText} from './dom.js';
import {api, tableUrl, TERMINAL} from './api.js';

// A table's exports as people use them in reports: "Copy as Markdown" (the
// table endpoint's md, onto the clipboard; shown to select by hand where the
// browser refuses) and "Download CSV", plus the md and json links.
// query: the endpoint's selectors (run, range, experiment); what: the table's
// name for the buttons' accessible names ("summary table").
export function tableExports(jobId, query = {}, what = 'table') {
  const base = `job-${jobId}${Object.values(query).filter((v) => v !== undefined && v !== '').map((v) => '-' + String(v).replace(/[^\w.-]+/g, '_')).join('')}`;
  const fallback = h('div', {class: 'copy-fallback', hidden: true});
  const copy = h('button', {type: 'button', class: 'small', 'aria-label': `Copy the ${what} as Markdown`, dataset: {export: 'md'}, onclick: async () => {
    try {
      const text = await api.tableText(jobId, query, 'md');
      if (await copyText(text)) { fallback.hidden = true; toast(`Copied the ${what} as Markdown (${text.trim().split('\n').length - 2} rows)`); return; }
      const ta = h('textarea', {rows: Math.min(12, text.split('\n').length), readonly: true, 'aria-label': `the ${what} as Markdown`}, text);
      mount(fallback, h('p', {class: 'muted'}, 'The browser did not allow copying: select the text below and copy it.'), ta);
      fallback.hidden = false;
      ta.focus();
      ta.select();
    } catch (e) { toast(`Could not copy the ${what}: ${e.message}`, 'error'); }
  }}, 'Copy as Markdown');
  return h('div', {class: 'table-exports', dataset: {query: new URLSearchParams(query).toString()}},
    copy, ' ',
    h('a', {class: 'button small', href: tableUrl(jobId, query, 'csv'), download: `${base}.csv`, 'aria-label': `Download the ${what} as CSV`, dataset: {export: 'csv'}}, 'Download CSV'),
    h('span', {class: 'muted'}, ' also as ',
      h('a', {href: tableUrl(jobId, query, 'md'), download: `${base}.md`, dataset: {export: 'md-file'}}, 'Markdown file'), ' · ',
      h('a', {href: tableUrl(jobId, query, 'json'), dataset: {export: 'json'}}, 'JSON')),
    fallback);
}

// Text exports of a table the page builds itself (the compare page's): rows of
// cells, the header first, as CSV, a cell quoted where it holds a comma, quote or newline.
export function csvText(rows) {
  const esc = (v) => (/[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
  return rows.map((r) => r.map(esc).join(',')).join('\n') + '\n';
}

// The same as a Markdown table: text cells padded to their column's width, right[i]
// for a column aligned right (numbers); a | inside a cell is escaped.
export function markdownTable(head, body, right) {
  const rows = [head, ...body].map((r) => r.map((c) => c.replace(/\|/g, '\\|')));
  const widths = head.map((_, i) => Math.max(...rows.map((r) => r[i].length), 3));
  const line = (cells) => '| ' + cells.map((c, i) => (right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ') + ' |';
  const sep = '|' + widths.map((w, i) => (right[i] ? '-'.repeat(w + 1) + ':' : '-'.repeat(w + 2))).join('|') + '|';
  return [line(rows[0]), sep, ...rows.slice(1).map(line)].join('\n') + '\n';
}

// A cell of the table endpoint as the md/csv forms print it: a real with its
// column's decimals (the table's "decimals"), else to 6 significant digits;
// null as "—", text (e.g. "OOM", "failed") verbatim.
export function endpointCell(v, decimals) {
  if (v === null) return '—';
  if (typeof v !== 'number') return String(v);
  return Number.isInteger(decimals) ? v.toFixed(decimals) : String(+v.toPrecision(6));
}

// GET /v1/jobs/{id}/table?format=json (narrowed or reshaped by query: the
// endpoint's selectors) drawn as is (endpointCell). Fills `box` when it arrives.
// exports: the table's tableExports (what: its name) under it, once the job has finished.
export function endpointTable(job, {id, title, numeric = /MiB|ms|batch|context|seq|^d$/, what = 'table', query = {}, note = null}) {
  const box = h('div', {id: `${id}-box`});
  api.table(job.id, query).then((t) => {
    if (!t || !t.columns) return;
    const numCol = t.columns.map((c, k) => numeric.test(c) || t.rows.some((r) => typeof r[k] === 'number'));
    mount(box, title ? h('h2', null, title) : null, h('div', {class: 'scroll'}, h('table', {class: 'results', id},
      h('caption', {class: 'sr-only'}, title || what),
      h('thead', null, h('tr', null, t.columns.map((c, k) => h('th', {scope: 'col', class: numCol[k] ? 'num' : ''}, c)))),
      h('tbody', null, t.rows.map((row) => h('tr', null, row.map((v, k) => h('td',
        {class: `${numCol[k] ? 'num' : ''}${v === 'OOM' ? ' oom' : v === 'failed' ? ' error' : ''}`, dataset: typeof v === 'number' ? {value: v} : undefined},
        endpointCell(v, (t.decimals || [])[k])))))))),
    note ? h('p', {class: 'muted'}, note) : null,
    TERMINAL.has(job.status) ? tableExports(job.id, query, what) : null);
  }).catch((e) => mount(box, h('p', {class: 'error'}, `table: ${e.message}`)));
  return box;
}

// columns: [{key, label, num?, get(row) → sort value, cell(row) → td content, title?(row), class?}]
// opts: {id, rows, sort: {key, dir: 'asc'|'desc'}, caption, rowAttrs?(row)}
export function sortableTable(columns, opts) {
  const state = {...(opts.sort || {key: columns[0].key, dir: 'asc'})};
  const tbody = h('tbody');
  const ths = columns.map((c) => {
    const btn = h('button', {type: 'button', class: 'sort', dataset: {key: c.key}}, c.label);
    btn.addEventListener('click', () => {
      state.dir = state.key === c.key && state.dir === (c.num ? 'desc' : 'asc') ? (c.num ? 'asc' : 'desc') : (c.num ? 'desc' : 'asc');
      state.key = c.key;
      draw();
    });
    return h('th', {scope: 'col', class: `${c.num ? 'num' : ''} ${c.class || ''}`, dataset: {key: c.key}}, btn);
  });
  const table = h('table', {class: 'results sortable', id: opts.id},
    opts.caption ? h('caption', null, opts.caption) : null,
    h('thead', null, h('tr', null, ths)), tbody);
  function draw() {
    const col = columns.find((c) => c.key === state.key) || columns[0];
    const sign = state.dir === 'asc' ? 1 : -1;
    const rows = [...opts.rows].sort((a, b) => {
      const x = col.get(a), y = col.get(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), 'en', {numeric: true})) * sign;
    });
    ths.forEach((th, i) => {
      if (columns[i].key === state.key) th.setAttribute('aria-sort', state.dir === 'asc' ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    });
    mount(tbody, rows.map((r) => h('tr', opts.rowAttrs ? opts.rowAttrs(r) : null, columns.map((c) => h('td', {
      class: `${c.num ? 'num' : ''} ${c.class || ''}`, title: c.title ? c.title(r) : null,
      dataset: {value: c.get(r) ?? ''}}, c.cell ? c.cell(r) : String(c.get(r) ?? '—'))))));
    if (!rows.length) mount(tbody, h('tr', null, h('td', {colspan: columns.length, class: 'empty'}, opts.empty || 'Nothing to show.')));
  }
  draw();
  return table;
}
