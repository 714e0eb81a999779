// Job list: filters (kind, status, model), live status and progress (polls
// every second while a listed job is queued or running), select for compare.
import {h, mount, toast} from '../dom.js';
import {api, ACTIVE, POLL_ACTIVE_MS, POLL_IDLE_MS} from '../api.js';
import {when, duration} from '../format.js';
import {specModel} from '../kinds.js';
import {replaceParams, link} from '../route.js';

const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted'];
const PAGE = 50;

// A running job whose cancel was asked for (the API's cancel_requested_at)
// reads "cancelling…" until its worker stops, or is killed after the grace.
export const cancelling = (job) => job.status === 'running' && !!job.cancel_requested_at;

export function statusBadge(status, job = null) {
  if (job && cancelling(job))
    return h('span', {class: 'badge s-cancelling', title: `cancel asked for at ${when(job.cancel_requested_at)}; the job stops at its next check, or its worker is stopped after a grace period`}, 'cancelling…');
  return h('span', {class: `badge s-${status}`}, status);
}

// After DELETE: a queued job is cancelled at once, a running one is asked to stop.
export function cancelledToast(job) {
  toast(job && job.status === 'running' ? `Cancelling job ${job.id}…` : `Job ${job ? job.id : ''} cancelled`);
}

export function progressCell(job) {
  const f = job.progress && typeof job.progress.fraction === 'number' ? job.progress.fraction : 0;
  const pct = Math.round(f * 100);
  if (!ACTIVE.has(job.status)) return h('span', {class: 'muted'}, job.status === 'succeeded' ? '100 %' : `${pct} %`);
  return h('span', {class: 'progress'},
    h('progress', {max: 100, value: pct, 'aria-label': `job ${job.id} progress`}, `${pct} %`),
    h('span', {class: 'pct'}, `${pct} %`),
    job.progress && job.progress.message ? h('span', {class: 'muted msg'}, job.progress.message) : null);
}

export async function render(main, ctx) {
  const params = ctx.params;
  const state = {
    kind: params.get('kind') || '', status: params.get('status') || '', model: params.get('model') || '',
    offset: Number(params.get('offset')) || 0, highlight: Number(params.get('highlight')) || 0,
  };
  const selected = new Set();
  const rows = new Map(); // id -> {tr, cells}
  let timer = null, stopped = false;

  const kinds = ctx.system.kinds || [];
  const sel = (name, label, options) => h('label', null, label,
    h('select', {name, onchange: (e) => { state[name] = e.target.value; state.offset = 0; sync(); refresh(); }},
      h('option', {value: ''}, 'all'), options.map((o) => h('option', {value: o, selected: o === state[name]}, o))));
  const modelList = h('datalist', {id: 'model-names'});
  const filters = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter jobs', onsubmit: (e) => e.preventDefault()},
    sel('kind', 'Kind', kinds), sel('status', 'Status', STATUSES),
    h('label', null, 'Model', h('input', {name: 'model', type: 'search', list: 'model-names', value: state.model, placeholder: 'any',
      oninput: (e) => { state.model = e.target.value.trim(); sync(); draw(); }})), modelList);
  const compareBtn = h('button', {type: 'button', disabled: true, onclick: () => {
    location.hash = link('/compare', {jobs: [...selected].sort((a, b) => a - b).join(',')});
  }}, 'Compare selected');
  const count = h('p', {class: 'muted', 'aria-live': 'polite'});
  const tbody = h('tbody');
  const table = h('table', {class: 'jobs'},
    h('caption', {class: 'sr-only'}, 'Jobs, newest first'),
    h('thead', null, h('tr', null,
      h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Select')),
      // In a narrow window (style.css: .wide-only / .narrow-only) the model goes under the kind, the
      // progress under the status, the duration and device under the creation time: no column scrolls out of view.
      h('th', {scope: 'col', class: 'num'}, 'Job'), h('th', {scope: 'col'}, 'Kind', h('span', {class: 'narrow-only'}, ' · model')), h('th', {scope: 'col'}, 'Label'),
      h('th', {scope: 'col', class: 'wide-only'}, 'Model'), h('th', {scope: 'col'}, 'Status'), h('th', {scope: 'col', class: 'wide-only'}, 'Progress'),
      h('th', {scope: 'col'}, 'Created', h('span', {class: 'narrow-only'}, ' · duration · device')),
      h('th', {scope: 'col', class: 'num wide-only'}, 'Duration'), h('th', {scope: 'col', class: 'wide-only'}, 'Device'),
      h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Actions')))),
    tbody);
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const errorBox = h('p', {class: 'error', role: 'alert', hidden: true});
  mount(main, h('div', {class: 'page-head'}, h('h1', null, 'Jobs'), h('a', {class: 'button', href: '#/submit'}, 'Submit a job')),
    filters, h('div', {class: 'toolbar'}, compareBtn, count), errorBox, h('div', {class: 'scroll'}, table), pager);

  let last = {jobs: [], total: 0};

  function sync() {
    const p = new URLSearchParams();
    for (const k of ['kind', 'status', 'model']) if (state[k]) p.set(k, state[k]);
    if (state.offset) p.set('offset', state.offset);
    if (state.highlight) p.set('highlight', state.highlight);
    replaceParams(p);
  }

  function cellsFor(job) {
    const cb = h('input', {type: 'checkbox', 'aria-label': `select job ${job.id}`, checked: selected.has(job.id),
      onchange: (e) => { if (e.target.checked) selected.add(job.id); else selected.delete(job.id); compareBtn.disabled = selected.size === 0; }});
    const model = specModel(job.spec);
    // The narrow window's second lines (hidden in a wide one, where these have their own columns).
    const narrow = {status: h('span', {class: 'narrow-only stack'}), duration: h('span'), device: h('span')};
    const cells = {
      select: h('td', null, cb),
      id: h('td', {class: 'num'}, h('a', {href: `#/jobs/${job.id}`}, `#${job.id}`)),
      kind: h('td', {class: 'kind'}, job.kind, model ? h('span', {class: 'narrow-only stack muted'}, model) : null),
      label: h('td', {class: 'label'}, job.label || ''),
      model: h('td', {class: 'wide-only model'}, model),
      status: h('td', {class: 'status'}),
      progress: h('td', {class: 'wide-only'}),
      created: h('td', {class: 'created'}, h('span', {title: job.created_at}, when(job.created_at)),
        h('span', {class: 'narrow-only stack muted'}, narrow.duration, narrow.device)),
      duration: h('td', {class: 'num wide-only'}),
      device: h('td', {class: 'wide-only'}),
      actions: h('td'),
    };
    const tr = h('tr', {dataset: {id: job.id}}, Object.values(cells));
    if (job.id === state.highlight) tr.classList.add('highlight');
    return {tr, cells, narrow, key: ''};
  }

  function update(row, job) {
    const key = `${job.status}|${job.progress && job.progress.fraction}|${job.progress && job.progress.message}|${job.device}|${cancelling(job)}`;
    row.tr.dataset.status = job.status;
    if (ACTIVE.has(job.status) || row.key !== key) {
      const d = duration(job.started_at, job.finished_at);
      mount(row.cells.duration, d);
      mount(row.narrow.duration, job.started_at ? d : 'not started');
    }
    if (row.key === key) return;
    row.key = key;
    mount(row.cells.status, statusBadge(job.status, job), job.error ? h('span', {class: 'muted err', title: job.error}, ' ⚠') : null, row.narrow.status);
    mount(row.cells.progress, progressCell(job));
    mount(row.narrow.status, progressCell(job));
    mount(row.cells.device, job.device || '');
    mount(row.narrow.device, job.device ? ` · ${job.device}` : '');
    mount(row.cells.actions, ACTIVE.has(job.status) && !cancelling(job)
      ? h('button', {type: 'button', class: 'small', onclick: () => cancel(job.id)}, 'Cancel', h('span', {class: 'sr-only'}, ` job ${job.id}`))
      : null);
  }

  async function cancel(id) {
    try { cancelledToast(await api.cancel(id)); } catch (e) { toast(e.message, 'error'); }
    refresh();
  }

  function draw() {
    const names = new Set();
    const shown = last.jobs.filter((j) => {
      const m = specModel(j.spec);
      if (m) names.add(m);
      return !state.model || m.toLowerCase().includes(state.model.toLowerCase());
    });
    mount(modelList, [...names].sort().map((n) => h('option', {value: n})));
    const order = shown.map((j) => j.id);
    for (const j of shown) {
      let row = rows.get(j.id);
      if (!row) { row = cellsFor(j); rows.set(j.id, row); }
      update(row, j);
    }
    for (const [id, row] of rows) if (!order.includes(id)) { row.tr.remove(); rows.delete(id); }
    const current = [...tbody.children].map((tr) => Number(tr.dataset.id));
    if (current.join() !== order.join()) tbody.append(...order.map((id) => rows.get(id).tr));
    if (!shown.length) mount(tbody, h('tr', null, h('td', {colspan: 11, class: 'empty'}, last.total ? 'No job matches the model filter.' : 'No jobs yet. ', last.total ? null : h('a', {href: '#/submit'}, 'Submit one.'))));
    else if (tbody.querySelector('td.empty')) tbody.querySelector('td.empty').parentElement.remove();
    const from = last.total ? state.offset + 1 : 0, to = state.offset + last.jobs.length;
    count.textContent = `${from}–${to} of ${last.total} job${last.total === 1 ? '' : 's'}${state.model ? `, ${shown.length} of them with model “${state.model}”` : ''}`;
    mount(pager,
      state.offset > 0 ? h('button', {type: 'button', onclick: () => { state.offset = Math.max(0, state.offset - PAGE); sync(); refresh(); }}, '← Newer') : null,
      to < last.total ? h('button', {type: 'button', onclick: () => { state.offset += PAGE; sync(); refresh(); }}, 'Older →') : null);
  }

  async function refresh() {
    clearTimeout(timer);
    if (stopped) return;
    try {
      last = await api.list({kind: state.kind, status: state.status, limit: PAGE, offset: state.offset});
      errorBox.hidden = true;
      if (!stopped) draw();
    } catch (e) {
      errorBox.hidden = false;
      errorBox.textContent = `Could not load jobs: ${e.message}`;
    }
    if (stopped) return;
    const active = last.jobs.some((j) => ACTIVE.has(j.status));
    timer = setTimeout(refresh, active ? POLL_ACTIVE_MS : POLL_IDLE_MS);
  }

  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
