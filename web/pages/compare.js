// Compare benchmark runs across jobs: pick runs, get the seeds' table (model ×
// context with fwd/bwd/opt mean ± std, tokens/s, speedup against a chosen
// baseline's settings at the row's own model, context, batch and mode,
// differences highlighted), export CSV/Markdown, and charts.
// Memory runs picked too get their own table: peak MiB (measured, estimate,
// reserved) per model × context × mode, relative to the first memory row,
// exported as CSV/Markdown with the cells as shown.
// URL: #/compare?runs=JOB:INDEX,…  or  ?jobs=ID,…  &baseline=JOB:INDEX|job:ID &phase=total
import {h, mount, download, toast} from '../dom.js';
import {api} from '../api.js';
import * as fmt from '../format.js';
import {modelName} from '../kinds.js';
import {CONFIG, SHAPE, withShape, PHASES, compareRuns, phasesPresent, phaseDigits, statCell, contextChart, precisionChart, HOST_BUSY_LABEL, hostBusyShown,
  hostBusyCell, warningMark, runWarnings} from '../benchmark.js';
import {replaceParams, link} from '../route.js';
import {csvText, markdownTable} from '../table.js';

const RECENT_JOBS = 300; // picker: newest benchmark jobs loaded with their runs
const RECENT_MEMORY_JOBS = 50; // and memory jobs (their details carry timelines: fewer)
const SAME = 0.03;      // speedups within ±3 % count as "no difference"

const ref = (r) => `${r.job_id}:${r.index}`;

// A job's runs, each knowing its job. Failed points (out of memory, does not
// fit) come too: a row saying so, as on the job page and in /table.
function runsOf(job) {
  return job.kind !== 'benchmark' ? [] : (job.runs || []).filter((r) => (r.status === 'succeeded' ? !!r.stats : !!r.error))
    .map((r) => ({...r, kind: job.kind, job_id: job.id, job_label: job.label, job_created_at: job.created_at}));
}

function memoryRunsOf(job) {
  return job.kind !== 'memory' ? [] : (job.runs || []).filter((r) => (r.status === 'succeeded' ? typeof r.peak_allocated_bytes === 'number' : !!r.error))
    .map((r) => ({...r, kind: job.kind, job_id: job.id, job_label: job.label, job_created_at: job.created_at}));
}

const failed = (r) => r.status !== 'succeeded';
// "OOM" for a memory point past its limit (the run's oom record), else the status ("failed").
const failWord = (r) => (r.oom ? 'OOM' : r.status);

const MEMORY_ORDER = (a, b) => modelName(a).localeCompare(modelName(b), 'en', {numeric: true}) || a.context_length - b.context_length ||
  a.batch_size - b.batch_size || String(a.precision).localeCompare(String(b.precision)) || String(a.mode).localeCompare(String(b.mode)) ||
  a.job_id - b.job_id || a.index - b.index;

// Memory runs' table as data, shared by the HTML table and its exports: peaks in
// MiB; the ratio is against the first row that ran. A failed point is a row with
// its config, "OOM" (or "failed") for the peak and the reason. columns: [{key,
// label, num, text(run) → the cell as shown, td?(run, text) → the HTML cell}];
// rows: the runs in order; base: the first measured row.
function memoryModel(runs) {
  const rows = [...runs].sort(MEMORY_ORDER);
  const base = rows.find((r) => !failed(r));
  const anyFailed = runs.some(failed);
  const reserved = runs.some((r) => typeof r.reserved_peak_bytes === 'number'); // GPU runs only
  const mibTd = (get) => (r, text) => h('td', {class: 'num', dataset: {value: get(r) ?? ''}, title: typeof get(r) === 'number' ? `${fmt.int(get(r))} bytes` : null}, text);
  const mib = (key, label, get) => ({key, label, num: true, text: (r) => fmt.mib(get(r)), td: mibTd(get)});
  const ratio = (r) => (failed(r) || !base ? null : r.peak_allocated_bytes / base.peak_allocated_bytes);
  const columns = [
    {key: 'run', label: 'Run', num: true, text: (r) => `#${r.job_id}.${r.index}`,
      td: (r, text) => h('td', {class: 'num'}, h('a', {href: `#/jobs/${r.job_id}`, title: r.job_label || ''}, text))},
    {key: 'model', label: 'Model', text: modelName},
    {key: 'context_length', label: 'Context length', num: true, text: (r) => String(r.context_length)},
    {key: 'batch_size', label: 'Batch', num: true, text: (r) => String(r.batch_size)},
    {key: 'precision', label: 'Precision', text: (r) => r.precision},
    {key: 'mode', label: 'Mode', text: (r) => r.mode},
    {key: 'attention', label: 'Attention', text: (r) => r.attention || '—'},
    {key: 'peak', label: 'Peak (MiB)', num: true, text: (r) => (failed(r) ? failWord(r) : fmt.mib(r.peak_allocated_bytes)),
      td: (r, text) => (!failed(r) ? mibTd((x) => x.peak_allocated_bytes)(r, text) : h('td', {class: `num ${r.oom ? 'oom' : 'error'}`, dataset: {status: failWord(r)},
        title: typeof r.peak_allocated_bytes === 'number' ? `${fmt.mib(r.peak_allocated_bytes)} MiB allocated when it failed` : null}, text))},
    mib('estimate', 'Estimate (MiB)', (r) => r.estimated_memory_bytes ?? (r.estimate && r.estimate.total)),
    reserved ? mib('reserved', 'Reserved peak (MiB)', (r) => r.reserved_peak_bytes) : null,
    mib('residual', 'Residual stream (MiB)', (r) => r.residual_stream_bytes),
    {key: 'phase', label: 'Peak phase', text: (r) => (failed(r) ? (r.failed_phase ? `failed in ${r.failed_phase}` : '—') : r.peak_phase || '—')},
    // the first row's 1.00× is tagged "first" on the page (the Markdown export names that row under the table)
    {key: 'ratio', label: 'Peak ratio', num: true, text: (r) => (ratio(r) === null ? '—' : fmt.ratio(ratio(r))),
      td: (r, text) => h('td', {class: 'num', dataset: {value: ratio(r) ?? ''}}, r === base ? h('span', null, text, h('span', {class: 'tag'}, 'first')) : text)},
    anyFailed ? {key: 'error', label: 'Failed', text: (r) => (failed(r) ? r.error : ''),
      td: (r, text) => h('td', {class: failed(r) ? 'reason error' : ''}, text)} : null,
  ].filter(Boolean);
  return {columns, rows, base};
}

const memoryCells = (m) => m.rows.map((r) => m.columns.map((c) => c.text(r)));

function memoryCsv(m) {
  return csvText([m.columns.map((c) => c.label), ...memoryCells(m)]);
}

function memoryMarkdown(m) {
  return markdownTable(m.columns.map((c) => c.label), memoryCells(m), m.columns.map((c) => !!c.num)) +
    (m.base ? `\nPeak ratio: this row's peak ÷ the first measured row's (#${m.base.job_id}.${m.base.index})\n` : '');
}

function memoryTable(runs, onRemove) {
  const m = memoryModel(runs);
  // the benchmark table's buttons, here under the memory runs' heading (shown with or without benchmark runs)
  const exp = (what, file, text, type) => h('button', {type: 'button', class: 'small', 'aria-label': `Export the memory runs as ${what}`,
    onclick: () => download(file, text(m), type)}, `Export ${what}`);
  return h('section', {id: 'compare-memory-box'}, h('h2', null, 'Memory runs'),
    h('div', {class: 'table-exports'},
      exp('CSV', 'lmperf-compare-memory.csv', memoryCsv, 'text/csv'), ' ',
      exp('Markdown', 'lmperf-compare-memory.md', memoryMarkdown, 'text/markdown')),
    h('div', {class: 'scroll'}, h('table', {class: 'results compare', id: 'compare-memory'},
      h('caption', null, `${runs.length} memory run${runs.length > 1 ? 's' : ''}; peak ratio = this row's peak ÷ the first measured row's`),
      h('thead', null, h('tr', null, m.columns.map((c) => h('th', {scope: 'col', class: c.num ? 'num' : ''}, c.label)),
        h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Remove')))),
      h('tbody', null, m.rows.map((r) => h('tr', {dataset: {run: ref(r)}, class: r === m.base ? 'baseline' : ''},
        m.columns.map((c) => {
          const td = c.td ? c.td(r, c.text(r)) : h('td', {class: c.num ? 'num' : ''}, c.text(r));
          td.dataset.key = c.key;
          return td;
        }),
        h('td', null, h('button', {type: 'button', class: 'small link', 'aria-label': `remove run ${ref(r)}`, onclick: () => onRemove(ref(r))}, '×'))))))));
}

// The baseline is a configuration, not one run: the baseline run's values of
// the fields a speedup compares across — how a run ran (precision, attention,
// warm-up, measured steps, graphs, the optimizer's place, seed) where it varies
// between the rows, and its job when the rows come from several. A row's
// baseline run has those values and the row's own everywhere else (model,
// vocab, context, batch, mode): a train step against a train step. `job:ID` takes that job's value of every
// such field its runs agree on. Returns {fixed: [[field, value]], candidates}
// or null.
const JOB = {key: 'job', label: 'Job', get: (r) => r.job_id};
const ACROSS = CONFIG.filter((c) => ['precision', 'attention', 'warmup_steps', 'measure_steps', 'graphs', 'optimizer_in_backward', 'seed']
  .includes(c.key));

function baselineSpec(baseline, runs, pool) {
  if (!baseline) return null;
  if (baseline.startsWith('job:')) {
    const jid = Number(baseline.slice(4));
    const own = pool.filter((r) => r.job_id === jid);
    if (!own.length) return null;
    const fixed = [JOB, ...ACROSS.filter((c) => new Set(own.map(c.get)).size === 1)];
    return {fixed: fixed.map((c) => [c, c.get(own[0])]), candidates: own};
  }
  const b = pool.find((r) => ref(r) === baseline);
  if (!b) return null;
  const fixed = [...ACROSS, JOB].filter((c) => new Set(runs.map(c.get)).size > 1);
  return {fixed: fixed.map((c) => [c, c.get(b)]), candidates: runs};
}

// "precision fp32 · job #3": the baseline's values, for the legend and the exports.
function describeBaseline(spec) {
  return spec.fixed.map(([c, v]) => (c === JOB ? `job #${v}` : `${c.label.toLowerCase()} ${v}`)).join(' · ');
}

// A row's baseline run: the fixed values, and the row's own on every other field (the model by name
// and shape, as /v1/compare matches it); null when none ran the phase.
function baselineFor(row, spec, phase) {
  if (!spec || !spec.fixed.length) return null;
  const fixed = new Set(spec.fixed.map(([c]) => c));
  const same = [...CONFIG, ...SHAPE].filter((c) => !fixed.has(c));
  const b = spec.candidates.find((r) => spec.fixed.every(([c, v]) => c.get(r) === v) && same.every((c) => c.get(r) === c.get(row)));
  return b && b.stats && b.stats[phase] ? b : null;
}

// The table's rows as data, shared by the HTML table and the exports. shown: the config columns,
// Model's shape (d_model, d_ff, Layers, Heads) always right after it, as on the job page and in /v1/compare.
function tableModel(runs, baseline, phase, pool) {
  const phases = phasesPresent(runs);
  const varying = [...CONFIG, ...SHAPE].filter((c) => new Set(runs.map(c.get)).size > 1);
  const config = CONFIG.filter((c) => c.key === 'model' || c.key === 'context_length' || varying.includes(c));
  const shown = withShape(config);
  const common = CONFIG.filter((c) => !config.includes(c)).map((c) => [c.label, runs.length ? c.get(runs[0]) : '']);
  const spec = baselineSpec(baseline, runs, pool);
  const rows = [...runs].sort(compareRuns).map((r) => {
    const b = baselineFor(r, spec, phase);
    const speedup = b && r.stats && r.stats[phase] ? b.stats[phase].mean_ms / r.stats[phase].mean_ms : null;
    return {run: r, base: b, isBaseline: !!b && ref(b) === ref(r), speedup};
  });
  // What the speedup column compares, in words.
  const legend = !spec ? 'no baseline chosen'
    : !spec.fixed.length ? 'none: the rows differ only in model, vocab, context, batch or mode, which a speedup does not compare across'
      : `${describeBaseline(spec)}; each row against the run with these settings and the row's model, vocab, context, batch and mode (— where there is none)`;
  const rate = fmt.column(runs.filter((r) => !failed(r)).map((r) => r.tokens_per_s), fmt.rateDigits);
  // Host Busy (%) when a compared run was disturbed by other processes (as each job's table endpoint decides).
  return {phases, digits: phaseDigits(runs, phases), rate, shown, varying, common, rows, legend, host: hostBusyShown(runs)};
}

function toCsv(m, phase) {
  const head = ['job', 'run', ...m.shown.map((c) => c.key), ...m.phases.flatMap((p) => [`${p.key}_mean_ms`, `${p.key}_std_ms`]),
    'tokens_per_s', `speedup_${phase}`, 'speedup_baseline', ...(m.host ? ['host_busy_pct'] : []), 'status', 'error'];
  return csvText([head, ...m.rows.map(({run, base, speedup}) => [run.job_id, run.index, ...m.shown.map((c) => c.get(run) ?? ''),
    ...m.phases.flatMap((p) => (run.stats && run.stats[p.key] ? [run.stats[p.key].mean_ms, run.stats[p.key].std_ms] : ['', ''])),
    run.tokens_per_s ?? '', speedup ?? '', speedup === null ? '' : ref(base), ...(m.host ? [run.host_other_cpu_pct ?? ''] : []),
    run.status, run.error ?? ''])]);
}

function toMarkdown(m, phase) {
  // A run column only when two rows would otherwise read the same.
  const keys = m.rows.map(({run}) => m.shown.map((c) => c.get(run)).join('|'));
  const withRun = new Set(keys).size < keys.length;
  const head = [...(withRun ? ['Run'] : []), ...m.shown.map((c) => (c.key === 'context_length' ? 'Context Length' : c.label)),
    ...m.phases.map((p) => `${p.label} (ms)`), `Speedup (${phase})`, 'Tokens/s', ...(m.host ? [HOST_BUSY_LABEL] : [])];
  const off = withRun ? 1 : 0;
  const right = head.map((_, i) => i < off || i >= m.shown.length + off || m.shown[i - off].num);
  // A failed point reads as the seeds' OOM rows: the word in every time column, the reason below the table.
  const body = m.rows.map(({run, speedup}) => [...(withRun ? [`#${run.job_id}.${run.index}`] : []), ...m.shown.map((c) => String(c.get(run) ?? '—')),
    ...m.phases.map((p) => (failed(run) ? failWord(run) : run.stats[p.key] ? fmt.msPm(run.stats[p.key].mean_ms, run.stats[p.key].std_ms, m.digits[p.key]) : '—')),
    speedup === null ? '—' : fmt.ratio(speedup), m.rate(run.tokens_per_s),
    ...(m.host ? [typeof run.host_other_cpu_pct === 'number' ? fmt.fixed(run.host_other_cpu_pct, 0) : '—'] : [])]);
  const reasons = m.rows.filter(({run}) => failed(run)).map(({run}) => `#${run.job_id}.${run.index} ${failWord(run)}: ${run.error}\n`).join('') +
    m.rows.flatMap(({run}) => (run.warnings || []).map((w) => `#${run.job_id}.${run.index} warning: ${w}\n`)).join('');
  const common = m.common.length ? `\n${m.common.map(([k, v]) => `${k}: ${v}`).join(' · ')}\n` : '';
  return markdownTable(head, body, right) + (reasons ? `\n${reasons}` : '') + common + `\nSpeedup baseline: ${m.legend}\n`;
}

export async function render(main, ctx) {
  const params = ctx.params;
  const state = {
    runs: (params.get('runs') || '').split(',').filter(Boolean),
    jobs: (params.get('jobs') || '').split(',').filter(Boolean).map(Number),
    baseline: params.get('baseline') || '',
    // an unknown phase in a hand-edited URL falls back to the whole step
    phase: PHASES.some((p) => p.key === params.get('phase')) ? params.get('phase') : 'total',
    logX: params.get('logx') === '1', logY: params.get('logy') === '1',
    filter: '',
  };

  // Jobs named in the URL plus the newest succeeded benchmark jobs (for the picker).
  const [listed, listedMem] = await Promise.all([
    api.list({kind: 'benchmark', status: 'succeeded', limit: RECENT_JOBS}).catch(() => ({jobs: []})),
    (ctx.system.kinds || []).includes('memory') ? api.list({kind: 'memory', status: 'succeeded', limit: RECENT_MEMORY_JOBS}).catch(() => ({jobs: []})) : {jobs: []}]);
  const wanted = new Set([...listed.jobs.map((j) => j.id), ...listedMem.jobs.map((j) => j.id), ...state.jobs, ...state.runs.map((r) => Number(r.split(':')[0]))]);
  if (!ctx.isCurrent()) return;
  const jobs = await api.jobs([...wanted]);
  const pool = jobs.flatMap(runsOf);
  const memPool = jobs.flatMap(memoryRunsOf);
  const all = [...pool, ...memPool];
  for (const jid of state.jobs) for (const r of all) if (r.job_id === jid && !state.runs.includes(ref(r))) state.runs.push(ref(r));
  state.jobs = [];
  const missing = state.runs.filter((x) => !all.some((r) => ref(r) === x));
  state.runs = state.runs.filter((x) => all.some((r) => ref(r) === x));
  if (!state.baseline && state.runs.length) state.baseline = state.runs.find((x) => pool.some((r) => ref(r) === x && !failed(r))) || '';

  const tableBox = h('div');
  const memoryBox = h('div');
  const chartsBox = h('div', {class: 'charts'});
  const pickerBox = h('div');
  const controls = h('div', {class: 'controls'});
  mount(main,
    h('h1', null, 'Compare runs'),
    missing.length ? h('p', {class: 'error', role: 'alert'}, `Not found: ${missing.join(', ')}`) : null,
    controls, tableBox, chartsBox, memoryBox,
    h('details', {class: 'picker', open: state.runs.length === 0}, h('summary', null,
      `Pick runs (${pool.length} benchmark runs${memPool.length ? ` and ${memPool.length} memory runs` : ''} in the ${jobs.length} newest jobs)`), pickerBox));

  function sync() {
    const p = new URLSearchParams();
    if (state.runs.length) p.set('runs', state.runs.join(','));
    if (state.baseline) p.set('baseline', state.baseline);
    if (state.phase !== 'total') p.set('phase', state.phase);
    if (state.logX) p.set('logx', '1');
    if (state.logY) p.set('logy', '1');
    replaceParams(p);
  }

  // Removing the baseline run hands the baseline to a run of the same settings, else the first run left.
  function removeRun(x) {
    state.runs = state.runs.filter((y) => y !== x);
    if (state.baseline === x) {
      const gone = pool.find((r) => ref(r) === x);
      const left = selectedRuns().filter((r) => !failed(r));
      const twin = gone && left.find((r) => [...ACROSS, JOB].every((c) => c.get(r) === c.get(gone)));
      state.baseline = twin ? ref(twin) : left.length ? ref(left[0]) : '';
    }
    sync(); drawAll();
  }

  function selectedRuns() {
    return state.runs.map((x) => pool.find((r) => ref(r) === x)).filter(Boolean);
  }

  function selectedMemory() {
    return state.runs.map((x) => memPool.find((r) => ref(r) === x)).filter(Boolean);
  }

  function drawMemory() {
    const runs = selectedMemory();
    mount(memoryBox, runs.length ? memoryTable(runs, removeRun) : null);
  }

  function drawControls() {
    const runs = selectedRuns();
    const jobIds = [...new Set(runs.map((r) => r.job_id))];
    // One option per setting of the compared fields; its first run stands for it in the URL.
    const across = [...ACROSS, JOB].filter((c) => new Set(runs.map(c.get)).size > 1);
    const key = (r) => across.map((c) => c.get(r)).join('|');
    const reps = new Map();
    for (const r of [...runs].sort((a, b) => a.job_id - b.job_id || compareRuns(a, b))) if (!failed(r) && !reps.has(key(r))) reps.set(key(r), r);
    const current = state.baseline.startsWith('job:') ? null : pool.find((r) => ref(r) === state.baseline);
    const baseSel = h('select', {id: 'baseline', onchange: (e) => { state.baseline = e.target.value; sync(); drawTable(); }},
      h('option', {value: ''}, 'none'),
      across.length ? h('optgroup', {label: 'Runs with'}, [...reps].map(([k, r]) => h('option', {value: ref(r), selected: !!current && key(current) === k},
        describeBaseline({fixed: across.map((c) => [c, c.get(r)])})))) : null,
      jobIds.length > 1 ? h('optgroup', {label: 'Same shape and mode in a job'}, jobIds.map((j) => h('option', {value: `job:${j}`, selected: state.baseline === `job:${j}`},
        `job #${j} (matching model × context × batch × mode)`))) : null);
    const phaseSel = h('select', {id: 'phase', onchange: (e) => { state.phase = e.target.value; sync(); drawTable(); drawCharts(); }},
      PHASES.map((p) => h('option', {value: p.key, selected: p.key === state.phase}, p.long)));
    const check = (key, label) => h('label', {class: 'check'}, h('input', {type: 'checkbox', checked: state[key],
      onchange: (e) => { state[key] = e.target.checked; sync(); drawCharts(); }}), label);
    const copyLink = h('button', {type: 'button', disabled: !state.runs.length, onclick: async () => {
      try { await navigator.clipboard.writeText(location.href); toast('Link copied'); } catch { toast('Copy the address bar to share this view'); }
    }}, 'Copy link');
    // memory runs alone: the baseline, phase, log axes and exports are the benchmark table's and charts', so only the link
    // (the memory table's exports are under its heading)
    if (!runs.length && selectedMemory().length) { mount(controls, copyLink); return; }
    mount(controls,
      h('div', {class: 'field inline'}, h('label', {for: 'baseline'}, 'Baseline'), baseSel),
      h('div', {class: 'field inline'}, h('label', {for: 'phase'}, 'Speedup and charts of'), phaseSel),
      check('logX', 'log x'), check('logY', 'log y'),
      h('button', {type: 'button', disabled: !runs.length, onclick: () => { download('lmperf-compare.csv', toCsv(tableModel(selectedRuns(), state.baseline, state.phase, pool), state.phase), 'text/csv'); }}, 'Export CSV'),
      h('button', {type: 'button', disabled: !runs.length, onclick: () => { download('lmperf-compare.md', toMarkdown(tableModel(selectedRuns(), state.baseline, state.phase, pool), state.phase), 'text/markdown'); }}, 'Export Markdown'),
      copyLink);
  }

  function drawTable() {
    const runs = selectedRuns();
    if (!runs.length) { mount(tableBox, selectedMemory().length ? null : h('p', {class: 'muted'}, 'No runs selected yet: pick some below, or use “Compare” on a job.')); return; }
    const m = tableModel(runs, state.baseline, state.phase, pool);
    const diff = (c) => (m.varying.includes(c) ? 'differs' : '');
    mount(tableBox,
      m.common.length ? h('p', {class: 'common'}, 'All rows: ', m.common.map(([k, v], i) => [i ? ' · ' : '', h('strong', null, k), ' ', String(v)])) : null,
      h('p', {class: 'common', id: 'compare-baseline'}, h('strong', null, 'Speedup baseline'), ' ', m.legend),
      runWarnings(runs, (r) => `#${r.job_id}.${r.index}`, 'compare-warnings'),
      h('div', {class: 'scroll'}, h('table', {class: 'results compare', id: 'compare-table'},
        h('caption', null, `${runs.length} run${runs.length > 1 ? 's' : ''}; highlighted columns differ between rows; speedup = the baseline's ${state.phase} time ÷ this row's`),
        h('thead', null, h('tr', null,
          h('th', {scope: 'col', class: 'num'}, 'Run'),
          // headers wrap between words only ("Warm-up / steps", not "Warm- / up")
          m.shown.map((c) => h('th', {scope: 'col', class: `${c.num ? 'num' : ''} ${diff(c)}`, dataset: {key: c.key}}, (c.key === 'context_length' ? 'Context length' : c.label)
            .split(' ').map((w, i) => [i ? ' ' : '', h('span', {class: 'nowrap'}, w)]))),
          m.phases.map((p) => h('th', {scope: 'col', class: 'num', dataset: {phase: p.key}}, `${p.label} (ms)`)),
          // the speedup beside the times (as the table endpoint and the seeds put it), where a wide table still shows it
          h('th', {scope: 'col', class: 'num speedup'}, `Speedup (${state.phase})`),
          h('th', {scope: 'col', class: 'num'}, 'Tokens/s'),
          m.host ? h('th', {scope: 'col', class: 'num', title: "other processes' share of the host's CPUs during the measured steps"},
            HOST_BUSY_LABEL.split(' ').map((w, i) => [i ? ' ' : '', h('span', {class: 'nowrap'}, w)])) : null,
          h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Remove')))),
        h('tbody', null, m.rows.map(({run, base, isBaseline, speedup}) => h('tr', {class: isBaseline ? 'baseline' : '', dataset: {run: ref(run)}},
          h('td', {class: 'num'}, h('a', {href: `#/jobs/${run.job_id}`, title: run.job_label || ''}, `#${run.job_id}.${run.index}`), warningMark(run)),
          m.shown.map((c) => h('td', {class: `${c.num ? 'num' : ''} ${diff(c)}`, dataset: {key: c.key}}, String(c.get(run) ?? '—'))),
          failed(run) ? h('td', {colspan: m.phases.length, class: `reason ${run.oom ? 'oom' : 'error'}`, dataset: {status: failWord(run)}}, `${failWord(run)}: ${run.error}`)
            : m.phases.map((p) => statCell(run.stats[p.key], p.key, m.digits[p.key])),
          h('td', {class: `num speedup ${speedup === null ? '' : speedup > 1 + SAME ? 'faster' : speedup < 1 - SAME ? 'slower' : 'same'}`,
            dataset: {value: speedup ?? '', base: base ? ref(base) : ''}, title: base && !isBaseline ? `against #${base.job_id}.${base.index}` : null},
          isBaseline ? h('span', null, fmt.ratio(1), h('span', {class: 'tag'}, 'baseline')) : speedup === null ? '—' : fmt.ratio(speedup)),
          failed(run) ? h('td', {class: 'num tokens muted'}, '—') : h('td', {class: 'num tokens', dataset: {value: run.tokens_per_s}}, m.rate(run.tokens_per_s)),
          m.host ? hostBusyCell(run) : null,
          h('td', null, h('button', {type: 'button', class: 'small link', 'aria-label': `remove run ${ref(run)}`,
            onclick: () => removeRun(ref(run))}, '×'))))))));
  }

  function drawCharts() {
    const runs = selectedRuns();
    if (!runs.length) { mount(chartsBox); return; }
    const precisions = new Set(runs.map((r) => r.precision));
    mount(chartsBox,
      contextChart(runs, {phase: state.phase, logX: state.logX, logY: state.logY}),
      precisions.size > 1 ? precisionChart(runs, {phase: state.phase, reference: precisions.has('fp32') ? 'fp32' : [...precisions][0]}) : null);
  }

  function drawPicker() {
    const byJob = new Map();
    for (const r of all) {
      if (!byJob.has(r.job_id)) byJob.set(r.job_id, []);
      byJob.get(r.job_id).push(r);
    }
    const filterInput = h('input', {type: 'search', id: 'pick-filter', value: state.filter, placeholder: 'model, precision, context…',
      oninput: (e) => { state.filter = e.target.value.toLowerCase(); drawList(); }});
    const list = h('div', {class: 'pick-list'});
    const drawList = () => {
      const words = state.filter.split(/\s+/).filter(Boolean);
      const text = (r) => `#${r.job_id} ${r.job_label || ''} ${r.kind} ${failed(r) ? failWord(r) : ''} ${modelName(r)} ${r.context_length} ${r.batch_size} ${r.precision} ${r.mode} ${r.attention}`.toLowerCase();
      mount(list, [...byJob].sort((a, b) => b[0] - a[0]).map(([jid, rs]) => {
        const match = rs.filter((r) => words.every((w) => text(r).includes(w)));
        if (!match.length) return null;
        return h('fieldset', null, h('legend', null, `Job #${jid} ${rs[0].kind}${rs[0].job_label ? ' — ' + fmt.isolate(rs[0].job_label) : ''} · ${fmt.when(rs[0].job_created_at)}`),
          [...match].sort(rs[0].kind === 'benchmark' ? compareRuns : MEMORY_ORDER).map((r) => h('label', {class: 'check'},
            h('input', {type: 'checkbox', value: ref(r), checked: state.runs.includes(ref(r)), onchange: (e) => {
              if (e.target.checked) state.runs.push(ref(r)); else state.runs = state.runs.filter((x) => x !== ref(r));
              if (!state.baseline && r.stats && !failed(r)) state.baseline = ref(r);
              sync(); drawControls(); drawTable(); drawCharts(); drawMemory();
            }}),
            `${modelName(r)} · ctx ${r.context_length} · batch ${r.batch_size} · ${r.precision} · ${r.mode} · ${r.attention} — ` +
              (failed(r) ? `${failWord(r)}: ${r.error}` : r.stats ? `${fmt.ms(r.stats.total.mean_ms)} ms` : `peak ${fmt.mib(r.peak_allocated_bytes)} MiB`))));
      }));
      if (!list.children.length) mount(list, h('p', {class: 'muted'}, all.length ? 'No run matches.' : 'No succeeded benchmark or memory runs yet.'));
    };
    mount(pickerBox, h('div', {class: 'field inline'}, h('label', {for: 'pick-filter'}, 'Filter'), filterInput), list);
    drawList();
  }

  function drawAll() { drawControls(); drawTable(); drawCharts(); drawMemory(); drawPicker(); }
  sync();
  drawAll();
}

export {toCsv, toMarkdown, tableModel};
