// One job: status, progress, environment, spec, and its result rendered per
// kind (numerics: the accumulation table and the precision report; benchmark: the summary table and
// charts; allreduce, memory here; attention and profile in ../attention.js and
// ../profile.js; anything else: the JSON). Polls every second while it is active.
import {h, mount, toast} from '../dom.js';
import {api, ACTIVE, TERMINAL, POLL_ACTIVE_MS as POLL_MS} from '../api.js';
import * as fmt from '../format.js';
import {statusBadge, progressCell, cancelling, cancelledToast} from './jobs.js';
import {modelName, configKey} from '../kinds.js';
import {CONFIG, withShape, compareRuns, phasesPresent, phaseDigits, statCell, stepChart, contextChart, precisionChart, HOST_BUSY_LABEL, hostBusyShown, hostBusyCell,
  warningMark, runWarnings, SPEEDUP_VS_FP32_LABEL, speedupsVsFp32} from '../benchmark.js';
import {link} from '../route.js';
import {lineChart, stackedAreaChart} from '../chart.js';
import {attentionView} from '../attention.js';
import {endpointCell, endpointTable, tableExports} from '../table.js';
import {profileView} from '../profile.js';

// "1 warm-up step", "2 warm-up steps".
function plural(n, what) { return `${n} ${what}${n === 1 ? '' : 's'}`; }

function dl(pairs) {
  return h('dl', {class: 'facts'}, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

// The precision report's runs (one per precision): every op of the model with
// the formats of its inputs, output and accumulation, one collapsible table each.
function precisionReportView(job, runs) {
  if (!runs.length) return [];
  const cols = [['phase', 'Phase'], ['op', 'Op'], ['inputs', 'Inputs'], ['output', 'Output'],
    ['accumulate', 'Accumulate'], ['storage', '16-bit storage']];
  return [h('h2', null, 'Precision report'),
    h('p', {class: 'muted'}, `the formats each op used in one traced train step, computed on ${runs[0].computed_on}`),
    TERMINAL.has(job.status) ? tableExports(job.id, {experiment: 'precision_report'}, 'precision report (every precision)') : null,
    runs.map((run, i) => h('details', {open: i === 0},
      h('summary', null, `${run.precision} (${(run.rows || []).length} ops)`),
      h('div', {class: 'scroll'}, h('table', {class: 'results precision-report', dataset: {precision: run.precision}},
        h('caption', {class: 'sr-only'}, `Precision report, ${run.precision}: the formats of each op`),
        h('thead', null, h('tr', null, cols.map(([, label]) => h('th', {scope: 'col'}, label)), h('th', {scope: 'col', class: 'num'}, 'Calls'))),
        h('tbody', null, (run.rows || []).map((r) => h('tr', null, cols.map(([key]) => h('td', null, r[key])),
          h('td', {class: 'num'}, String(r.calls)))))))))];
}

// The accumulation table's results: 8 significant digits of the column's
// largest value, every row with those decimals (4.000000 beside 10.000134, not 4).
function resultColumn(rows) {
  const big = Math.max(0, ...rows.map((r) => (typeof r.result === 'number' ? Math.abs(r.result) : 0)));
  const d = Math.min(8, Math.max(0, 7 - (big > 0 ? Math.floor(Math.log10(big)) : 0)));
  return (x) => fmt.fixed(x, d);
}

function numericsView(job) {
  const out = [];
  const runs = job.runs || [];
  const report = runs.filter((r) => r.experiment === 'precision_report' && r.status === 'succeeded');
  for (const run of runs) {
    if (run.status !== 'succeeded') { out.push(h('p', {class: 'error'}, `Run ${run.index}: ${run.error || run.status}`)); continue; }
    if (run.experiment === 'precision_report') continue;
    const resultF = resultColumn(run.rows || []);
    out.push(h('h2', null, `Accumulation: ${fmt.int(run.count)} × ${run.summand}`),
      h('p', {class: 'muted'}, `computed on ${run.computed_on}`),
      h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'numerics-table'},
        h('caption', {class: 'sr-only'}, `Accumulation of ${run.summand}, ${fmt.int(run.count)} times, per accumulator and summand type`),
        h('thead', null, h('tr', null, ['Accumulator', 'Summand dtype', 'Cast'].map((c) => h('th', {scope: 'col'}, c)),
          ['Result', 'Exact', 'Error', 'Relative error'].map((c) => h('th', {scope: 'col', class: 'num'}, c)))),
        // A result past the accumulator's range has no JSON number: result and error null, non_finite 'inf'.
        h('tbody', null, (run.rows || []).map((r) => r.non_finite ? h('tr', {class: 'warn'},
          h('td', null, r.accumulator), h('td', null, r.summand_dtype), h('td', null, r.cast),
          h('td', {class: 'num', dataset: {value: r.non_finite}}, r.non_finite),
          h('td', {class: 'num'}, String(r.exact)),
          h('td', {class: 'num', dataset: {value: r.non_finite}}, r.non_finite),
          h('td', {class: 'num'}, '—')) : h('tr', {class: Math.abs(r.error) > 1e-3 * Math.abs(r.exact) ? 'warn' : ''},
          h('td', null, r.accumulator), h('td', null, r.summand_dtype), h('td', null, r.cast),
          h('td', {class: 'num', dataset: {value: r.result}}, resultF(r.result)),
          h('td', {class: 'num'}, String(r.exact)),
          h('td', {class: 'num', dataset: {value: r.error}}, r.error.toExponential(3)),
          h('td', {class: 'num', dataset: {value: r.exact ? r.error / r.exact : ''}}, r.exact ? fmt.percentSig(r.error / r.exact) : '—')))))),
      TERMINAL.has(job.status) ? tableExports(job.id, {experiment: 'accumulation'}, 'accumulation table') : null);
  }
  return out.concat(precisionReportView(job, report));
}

function benchmarkView(job) {
  const runs = (job.runs || []).filter((r) => r.status === 'succeeded' && r.stats);
  const failed = (job.runs || []).filter((r) => r.status !== 'succeeded');
  const failedList = failed.length ? h('ul', {class: 'error', id: 'bench-failed'}, failed.map((r) => h('li', null, `run ${r.index}: ${r.error || r.status}`))) : null;
  // No run measured (every point failed, or none ran): no empty table, only why.
  if (!runs.length)
    return [h('h2', null, 'Summary'),
      h('p', {class: 'muted', id: 'bench-none'}, failed.length ? `No run succeeded: ${failed.length} of ${failed.length} failed.` : 'No runs.'),
      failedList, runWarnings(failed, (r) => `Run ${r.index}`, 'bench-warnings')];
  const phases = phasesPresent(runs);
  const sorted = [...runs].sort(compareRuns);
  // Config that is the same in every run goes above the table, not in columns; the model's
  // shape (d_model, d_ff, Layers, Heads) always follows Model, as in the seeds' tables.
  const shown = CONFIG.filter((c) => c.key === 'model' || c.key === 'context_length' || new Set(runs.map(c.get)).size > 1);
  const common = CONFIG.filter((c) => !shown.includes(c));
  const columns = withShape(shown);
  const digits = phaseDigits(runs, phases);
  const tflopsF = fmt.column(runs.map((r) => r.achieved_tflops), fmt.sigDigits);
  const peakF = fmt.mibColumn(runs.map((r) => r.peak_memory_bytes));
  const rateF = fmt.column(runs.map((r) => r.tokens_per_s), fmt.rateDigits);
  // Host Busy (%) exactly when the job's table endpoint has it: some run, failed ones too, disturbed.
  const hostShown = hostBusyShown(job.runs || []);
  // "Speedup vs fp32 (×)" after Total exactly when the job's table endpoint has it (seed 002's speedup analysis).
  const speedup = speedupsVsFp32(runs);
  const table = h('table', {class: 'results', id: 'bench-summary'},
    h('caption', {class: 'sr-only'}, 'Benchmark summary: one row per run, times as mean ± std in ms'),
    h('thead', null, h('tr', null,
      h('th', {scope: 'col', class: 'num'}, 'Run'),
      columns.map((c) => h('th', {scope: 'col', class: c.num ? 'num' : '', dataset: {key: c.key}}, c.label)),
      phases.map((p) => h('th', {scope: 'col', class: 'num'}, `${p.label} (ms)`)),
      speedup.shown ? h('th', {scope: 'col', class: 'num', title: "the fp32 run's mean whole-step time at the same point over this run's"}, SPEEDUP_VS_FP32_LABEL) : null,
      h('th', {scope: 'col', class: 'num'}, 'Tokens/s'), h('th', {scope: 'col', class: 'num'}, 'TFLOP/s'),
      h('th', {scope: 'col', class: 'num'}, 'MFU'), h('th', {scope: 'col', class: 'num'}, 'Peak memory (MiB)'),
      hostShown ? h('th', {scope: 'col', class: 'num', title: "other processes' share of the host's CPUs during the measured steps"}, HOST_BUSY_LABEL) : null,
      h('th', {scope: 'col'}, h('span', {class: 'sr-only'}, 'Links')))),
    h('tbody', null, sorted.map((r) => h('tr', {dataset: {run: r.index}},
      h('td', {class: 'num'}, String(r.index), warningMark(r)),
      columns.map((c) => h('td', {class: c.num ? 'num' : '', dataset: {key: c.key}}, String(c.get(r) ?? '—'))),
      phases.map((p) => statCell(r.stats[p.key], '', digits[p.key])),
      speedup.shown ? h('td', {class: 'num speedup', dataset: {key: 'speedup_vs_fp32', value: speedup.speedups.get(r) ?? ''}}, fmt.fixed(speedup.speedups.get(r), 2)) : null,
      h('td', {class: 'num', dataset: {value: r.tokens_per_s}}, rateF(r.tokens_per_s)),
      h('td', {class: 'num', dataset: {value: r.achieved_tflops ?? ''}}, tflopsF(r.achieved_tflops)),
      h('td', {class: 'num'}, r.mfu === null || r.mfu === undefined ? '—' : fmt.percent(r.mfu)),
      h('td', {class: 'num', dataset: {value: r.peak_memory_bytes ?? ''}, title: r.estimated_memory_bytes ? `estimated ${fmt.mib(r.estimated_memory_bytes)} MiB` : null}, peakF(r.peak_memory_bytes)),
      hostShown ? hostBusyCell(r) : null,
      h('td', null, h('a', {href: link('/history', {config: configKey(r)})}, 'history'))))));

  // Each option names every sweep axis (mode too: forward and train_step runs of one shape are two runs).
  const runSel = h('select', {id: 'step-run'}, sorted.map((r) => h('option', {value: r.index},
    `run ${r.index}: ${modelName(r)}, context ${r.context_length}, batch ${r.batch_size}, ${r.precision}, ${r.mode}`)));
  const stepBox = h('div');
  const drawSteps = () => {
    const r = runs.find((x) => String(x.index) === runSel.value);
    mount(stepBox, r ? stepChart(r) : null);
  };
  runSel.addEventListener('change', drawSteps);
  drawSteps();
  const contexts = new Set(runs.map((r) => r.context_length));
  return [
    h('div', {class: 'page-head'}, h('h2', null, 'Summary'),
      h('a', {class: 'button', href: link('/compare', {jobs: job.id})}, 'Compare these runs')),
    h('p', {class: 'muted', id: 'bench-protocol'}, `mean ± std over ${plural(runs[0].measure_steps, 'measured step')} after ${new Set(runs.map((r) => r.warmup_steps)).size > 1 ? 'each run\'s warm-up steps (a column)' : plural(runs[0].warmup_steps, 'warm-up step')}; hover a time for median, min and max.`),
    runWarnings(job.runs || [], (r) => `Run ${r.index} (${modelName(r)}, context ${r.context_length}, batch ${r.batch_size}, ${r.precision}, ${r.mode})`, 'bench-warnings'),
    runs.length && common.length ? h('p', {class: 'common'}, 'All runs: ', common.map((c, i) => [i ? ' · ' : '', h('strong', null, c.label), ' ', String(c.get(runs[0]))])) : null,
    h('div', {class: 'scroll'}, table),
    TERMINAL.has(job.status) ? tableExports(job.id, {}, 'summary table') : null,
    failedList,
    // Seed 002's tables by precision (Total per precision, speedups over fp32): the endpoint's ?pivot=precision.
    new Set((job.runs || []).map((r) => r.precision)).size > 1 ? endpointTable(job, {id: 'bench-by-precision',
      title: 'By precision', query: {pivot: 'precision'}, what: 'table by precision', numeric: /ms|×|Batch|Context|^d_|Layers|Heads/,
      note: 'Mean whole-step time per precision at each point, and each precision\'s speedup over fp32 there; N/A: that run failed (its reason above).'}) : null,
    sorted.length ? h('section', {class: 'chart-box'}, h('h2', null, 'Per-step times'),
      h('div', {class: 'field inline'}, h('label', {for: 'step-run'}, 'Run'), runSel), stepBox) : null,
    contexts.size > 1 ? contextChart(runs) : null,
    speedup.shown ? precisionChart(runs) : null,
  ];
}

// The backends in the order a job runs them (nccl, then mpi), and how a
// series is named: "2 ranks" for a job of one backend, "nccl, 2 ranks" for one
// that ran both (seed 002's GPU vs CPU comparison), so every chart has one line
// per (backend, world size).
const BACKEND_ORDER = ['nccl', 'mpi'];
const backendRank = (b) => { const i = BACKEND_ORDER.indexOf(b); return i < 0 ? BACKEND_ORDER.length : i; };
const backendsOf = (runs) => [...new Set(runs.map((r) => r.backend))].sort((a, b) => backendRank(a) - backendRank(b));

// The ⚠ after an oversubscribed point's ranks (its devices on hover and for screen readers).
function oversubscribedMark(r) {
  const text = `oversubscribed: ${r.world_size} ranks on fewer cores${r.devices ? ` (${r.devices})` : ''}`;
  return h('span', {class: 'warn-mark', title: text}, ' ⚠', h('span', {class: 'sr-only'}, ` ${text}`));
}

// A backend as the heading names it: nccl with the launch its runs record when that is one process per GPU
// ("nccl (processes)"); threads, the default, and mpi (always processes) go unsaid.
function launchedAs(runs, backend) {
  const launches = [...new Set(runs.filter((r) => r.backend === backend && r.launch).map((r) => r.launch))];
  return backend === 'nccl' && launches.includes('processes') ? `nccl (${launches.join(', ')})` : backend;
}

function allreduceView(job) {
  const runs = [...(job.runs || [])].sort((a, b) => backendRank(a.backend) - backendRank(b.backend) || a.world_size - b.world_size || a.size_bytes - b.size_bytes);
  const ok = runs.filter((r) => r.status === 'succeeded');
  const backends = backendsOf(runs);
  const several = backends.length > 1;
  const who = (backend, rest) => (several ? `${backend}, ${rest}` : rest);
  const worlds = [...new Set(ok.map((r) => r.world_size))].sort((a, b) => a - b);
  // mpi points with more ranks than cores (the table endpoint's "oversubscribed" column): flagged, as their times are
  const over = ok.filter((r) => r.oversubscribed);
  const sizes = [...new Set(ok.map((r) => r.size_bytes))].sort((a, b) => a - b);
  // (backend, value) pairs that have succeeded points, backend by backend.
  const pairs = (values, key) => backends.flatMap((be) => values.filter((v) => ok.some((r) => r.backend === be && r[key] === v)).map((v) => [be, v]));
  // The table's four times share one number of decimals (a median of 0.1000 beside a mean of 0.100 read as two
  // precisions); each bandwidth column has its own.
  const msF = fmt.column(ok.flatMap((r) => [r.mean_ms, r.median_ms, r.min_ms, r.max_ms]), fmt.msDigits);
  const [algF, busF] = ['algbw_gbps', 'busbw_gbps'].map((k) => fmt.column(ok.map((r) => r[k]), fmt.msDigits));
  const series = (key) => pairs(worlds, 'world_size').map(([be, w]) => ({name: who(be, `${w} ranks`),
    points: ok.filter((r) => r.backend === be && r.world_size === w && typeof r[key] === 'number')
      .map((r) => ({x: r.size_bytes, y: r[key], label: `${who(be, `${w} ranks`)}, ${r.size}: ${key === 'mean_ms' ? fmt.ms(r[key]) + ' ms' : fmt.gbps(r[key]) + ' GB/s'}`}))}));
  // Overlay: another all-reduce job (e.g. the other backend) on one bandwidth chart.
  const overlayBox = h('div', {id: 'allreduce-overlay'});
  const overlaySel = h('select', {id: 'allreduce-other'}, h('option', {value: ''}, '—'));
  const busSeries = (j) => {
    const rs = (j.runs || []).filter((r) => r.status === 'succeeded' && typeof r.busbw_gbps === 'number');
    return backendsOf(rs).flatMap((be) => [...new Set(rs.filter((r) => r.backend === be).map((r) => r.world_size))].sort((a, b) => a - b)
      .map((w) => ({name: `#${j.id} ${be}, ${w} ranks`, points: rs.filter((r) => r.backend === be && r.world_size === w).sort((a, b) => a.size_bytes - b.size_bytes)
        .map((r) => ({x: r.size_bytes, y: r.busbw_gbps, label: `#${j.id} ${be}, ${w} ranks, ${r.size}: ${fmt.gbps(r.busbw_gbps)} GB/s`}))})));
  };
  const specBackends = (spec) => [].concat(spec && spec.backend ? spec.backend : []).join(' + ');
  overlaySel.addEventListener('change', async () => {
    if (!overlaySel.value) { mount(overlayBox); return; }
    try {
      const other = await api.job(Number(overlaySel.value));
      mount(overlayBox, lineChart({title: `Bus bandwidth vs size: job ${job.id} vs job ${other.id}`, series: [...busSeries(job), ...busSeries(other)],
        xLabel: 'bytes per rank', yLabel: 'bus bandwidth (GB/s)', logX: true, xFormat: (v) => fmt.bytesSI(v), yFormat: (v) => fmt.gbps(v)}));
    } catch (e) { mount(overlayBox, h('p', {class: 'error'}, e.message)); }
  });
  if (ok.length) api.list({kind: 'allreduce', status: 'succeeded', limit: 200}).then((page) => {
    for (const j of page.jobs || []) if (j.id !== job.id)
      overlaySel.append(h('option', {value: j.id}, `#${j.id} ${specBackends(j.spec)}${j.label ? ' — ' + fmt.isolate(j.label) : ''}`));
  }).catch(() => {});
  return [
    h('h2', {id: 'allreduce-heading'}, `All-reduce (${backends.map((be) => launchedAs(runs, be)).join(' vs ')}, ${runs[0] ? runs[0].dtype : ''})`),
    h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'allreduce-table'},
      h('caption', {class: 'sr-only'}, 'All-reduce times and bandwidths per number of ranks and size'),
      h('thead', null, h('tr', null, several ? h('th', {scope: 'col'}, 'Backend') : null,
        h('th', {scope: 'col', class: 'num'}, 'Ranks'), h('th', {scope: 'col', class: 'num'}, 'Size per rank'),
        ['Mean (ms)', 'Median (ms)', 'Min (ms)', 'Max (ms)', 'Alg bw (GB/s)', 'Bus bw (GB/s)'].map((c) => h('th', {scope: 'col', class: 'num'}, c)),
        h('th', {scope: 'col'}, 'Sum'))),
      h('tbody', null, runs.map((r) => h('tr', {class: r.status === 'succeeded' ? '' : 'warn', dataset: {backend: r.backend}},
        several ? h('td', null, r.backend) : null,
        h('td', {class: 'num', title: r.devices && !r.oversubscribed ? `ran on ${r.devices}` : undefined, dataset: {oversubscribed: r.oversubscribed ? 'yes' : 'no'}},
          String(r.world_size), r.oversubscribed ? oversubscribedMark(r) : null),
        h('td', {class: 'num', title: `${fmt.int(r.size_bytes)} bytes`}, r.size || fmt.bytes(r.size_bytes)),
        r.status === 'succeeded'
          ? [msF(r.mean_ms), msF(r.median_ms), msF(r.min_ms), msF(r.max_ms)].map((v) => h('td', {class: 'num'}, v))
            .concat([algF(r.algbw_gbps), busF(r.busbw_gbps)].map((v) => h('td', {class: 'num'}, v)))
          : h('td', {colspan: 6, class: 'error'}, r.error || r.status),
        h('td', null, r.correct === false ? h('span', {class: 'error'}, 'wrong') : r.correct ? 'checked' : '—')))))),
    TERMINAL.has(job.status) ? tableExports(job.id, {}, 'all-reduce table') : null,
    over.length ? h('p', {class: 'run-warnings', id: 'allreduce-oversubscribed', role: 'note'}, `⚠ ${over.length} of ${runs.length} points ran more ranks than the host's cores ` +
      `(${[...new Set(over.map((r) => r.devices).filter(Boolean))].join('; ') || 'oversubscribed'}): their ranks shared cores, so their times, and the time vs ranks trend, include that.`) : null,
    ok.length ? lineChart({title: 'All-reduce time vs size', series: series('mean_ms'), xLabel: 'bytes per rank', yLabel: 'mean time (ms)',
      logX: true, logY: true, categoricalX: false, xFormat: (v) => fmt.bytesSI(v), yFormat: (v) => fmt.ms(v)}) : null,
    worlds.length > 1 ? lineChart({title: 'All-reduce time vs number of ranks', series: pairs(sizes, 'size_bytes').map(([be, sz]) => ({name: who(be, fmt.bytesSI(sz)),
      points: ok.filter((r) => r.backend === be && r.size_bytes === sz).map((r) => ({x: r.world_size, y: r.mean_ms, label: `${who(be, r.size || fmt.bytesSI(sz))}, ${r.world_size} ranks: ${fmt.ms(r.mean_ms)} ms`}))})),
      xLabel: 'ranks', yLabel: 'mean time (ms)', logY: true, xFormat: (v) => fmt.int(v), yFormat: (v) => fmt.ms(v)}) : null,
    ok.length ? lineChart({title: 'Bus bandwidth vs size', series: series('busbw_gbps'), xLabel: 'bytes per rank', yLabel: 'bus bandwidth (GB/s)',
      logX: true, categoricalX: false, xFormat: (v) => fmt.bytesSI(v), yFormat: (v) => fmt.gbps(v)}) : null,
    ok.length ? h('section', {class: 'chart-box'}, h('h2', null, 'Compare with another all-reduce job'),
      h('div', {class: 'field inline'}, h('label', {for: 'allreduce-other'}, 'Overlay job'), overlaySel),
      h('p', {class: 'muted'}, 'e.g. the NCCL job beside this MPI one: bus bandwidth of both on one chart.'), overlayBox) : null,
  ];
}


// Memory: the seeds' table (context × inference/train-step peak), then per run
// the allocation timeline stacked by category (time or event index), phase
// markers, the largest allocations, the breakdown at the peak and measured vs
// estimate. The full event list is fetched on first hover (for the allocation's
// name) when it is small enough; else the hover names the phase.
const EVENTS_ON_HOVER_MAX = 50000;

function phaseLabel(p) { return p.step >= 0 ? `${p.name} ${p.step}` : p.name; }

// The timeline's data table: one row per phase, its highest point (time, event,
// total and each category's live MiB); a run of more phases than this, one row
// per equal slice of the points instead, so the table stays short.
const TIMELINE_TABLE_ROWS = 100;

function timelineTable(r, phaseAt) {
  const tl = r.timeline || {categories: [], points: []};
  const pts = tl.points, phases = r.phases || [];
  if (!pts.length) return null;
  const total = (p) => p.slice(2).reduce((a, b) => a + b, 0);
  // buckets of point indices: per phase (the points from its start to the next's), else equal slices
  const byPhase = phases.length > 0 && phases.length <= TIMELINE_TABLE_ROWS;
  const buckets = [];
  if (byPhase) {
    let k = 0;
    phases.forEach(() => buckets.push([]));
    pts.forEach((p, i) => {
      while (k + 1 < phases.length && phases[k + 1].start_ms <= p[0]) k++;
      buckets[k].push(i);
    });
  } else {
    const per = Math.ceil(pts.length / TIMELINE_TABLE_ROWS);
    for (let i = 0; i < pts.length; i += per) buckets.push(Array.from({length: Math.min(per, pts.length - i)}, (_, j) => i + j));
  }
  const rows = buckets.map((b, k) => {
    if (!b.length) return {label: byPhase ? phaseLabel(phases[k]) : '', p: null};
    const i = b.reduce((best, j) => (total(pts[j]) > total(pts[best]) ? j : best), b[0]);
    const ph = byPhase ? phases[k] : phaseAt(pts[i][0]);
    return {label: ph ? phaseLabel(ph) : '—', p: pts[i]};
  });
  const cats = tl.categories.map((c, k) => [c, k]).filter(([, k]) => pts.some((p) => p[2 + k] > 0));
  const shown = rows.filter((x) => x.p);
  const timeF = fmt.column(shown.map((x) => x.p[0]), fmt.msDigits);
  const totalF = fmt.mibColumn(shown.map((x) => total(x.p)));
  const catF = cats.map(([, k]) => fmt.mibColumn(shown.map((x) => x.p[2 + k])));
  return h('table', {class: 'data', id: 'memory-timeline-table'},
    h('caption', null, byPhase ? `Live memory at each phase's highest point (${phases.length} phases), MiB`
      : `Live memory at the highest point of each of ${rows.length} equal slices of the ${fmt.int(pts.length)} points, MiB`),
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Phase'), h('th', {scope: 'col', class: 'num'}, 'Time (ms)'),
      h('th', {scope: 'col', class: 'num'}, 'Event'), h('th', {scope: 'col', class: 'num'}, 'Total (MiB)'),
      cats.map(([c]) => h('th', {scope: 'col', class: 'num'}, c)))),
    h('tbody', null, rows.map(({label, p}) => h('tr', {dataset: p ? {t: p[0], event: p[1]} : {}},
      h('th', {scope: 'row'}, label),
      p ? [h('td', {class: 'num'}, timeF(p[0])), h('td', {class: 'num'}, fmt.int(p[1])),
        h('td', {class: 'num', dataset: {value: total(p)}}, totalF(total(p))),
        cats.map(([c, k], j) => h('td', {class: 'num', dataset: {value: p[2 + k], category: c}}, catF[j](p[2 + k])))]
        : h('td', {class: 'muted', colspan: 3 + cats.length}, 'no points in this phase')))));
}

// A weight the model stacks with the ones after it into one allocation (kernels/model.c: q, k, v as one
// (3d, d) block; w1, w3 as one (2·d_ff, d)) is named after the first with "+N", the N stacked after it:
// said under the largest allocations when one of them is such a block (seed 002's "where they come from").
const FUSED_NAME = /\.(\w+)\.weight\+(\d+)$/;
function fusedNote(allocations) {
  const fused = [...new Set(allocations.map((a) => (a.name.match(FUSED_NAME) || [])[0]).filter(Boolean).map((n) => n.slice(1)))];
  if (!fused.length) return null;
  return h('p', {class: 'muted', id: 'memory-fused-note'}, `A name ending in +N is one allocation holding that weight and the N stacked after it ` +
    `(${fused.map((n) => (/^q_proj/.test(n) ? `${n}: q_proj, k_proj and v_proj` : /^w1\./.test(n) ? `${n}: w1 and w3` : `${n}: ${n.split('+')[0]} and ${n.split('+')[1]} more`)).join('; ')}).`);
}

function memoryRunView(job, r) {
  const tl = r.timeline || {categories: [], points: []};
  const cats = tl.categories, pts = tl.points;
  const phases = r.phases || [];
  // Event index where each phase starts: phases are consecutive runs of events.
  const sumEvents = phases.reduce((a, p) => a + (p.events || 0), 0);
  const phaseStartIdx = [];
  let acc = 0;
  for (const p of phases) { phaseStartIdx.push(acc); acc += p.events || 0; }
  const indexOk = sumEvents === r.event_count;
  const approxIndex = (t) => { const q = pts.find((p) => p[0] >= t); return q ? q[1] : (pts.length ? pts[pts.length - 1][1] : 0); };
  const phaseAt = (t) => { let k = -1; phases.forEach((p, i) => { if (p.start_ms <= t) k = i; }); return phases[k]; };
  let events = null, eventsLoading = false;
  const chartBox = h('div');
  const mode = {x: 'time'};
  let svg = null;
  // record_events false: the daemon kept no event list (its /events answers 404).
  const kept = !job.spec || job.spec.record_events !== false;
  const loadEvents = () => {
    if (!kept || events || eventsLoading || !(r.event_count <= EVENTS_ON_HOVER_MAX)) return;
    eventsLoading = true;
    fetch(`/v1/jobs/${job.id}/events?run=${r.index}`).then((res) => (res.ok ? res.json() : null)).then((d) => {
      events = d && d.rows ? d.rows : null;
      if (svg && svg.refreshTip) svg.refreshTip();
    }).catch(() => {});
  };
  const hoverLines = (i) => {
    const p = pts[i];
    const live = p.slice(2);
    const total = live.reduce((a, b) => a + b, 0);
    const ph = phaseAt(p[0]);
    const ev = events && events[p[1]];
    const lines = [`t ${fmt.ms(p[0])} ms · event ${fmt.int(p[1])}${ph ? ' · ' + phaseLabel(ph) : ''}`,
      ev ? `${ev[1]} ${ev[4]} (${ev[3]}, ${fmt.mib(ev[2])} MiB)` : null,
      `total ${fmt.mib(total)} MiB`];
    cats.forEach((c, k) => { if (live[k] > 0) lines.push(`  ${c}: ${fmt.mib(live[k])} MiB`); });
    return lines.filter((x) => x);
  };
  const draw = () => {
    const byIndex = mode.x === 'index';
    const fig = stackedAreaChart({
      title: `Live memory by category (run ${r.index})`, id: 'memory-timeline', categories: cats,
      xs: pts.map((p) => (byIndex ? p[1] : p[0])), values: pts.map((p) => p.slice(2)),
      xLabel: byIndex ? 'event index' : 'time (ms)', yLabel: 'allocated (MiB)',
      xFormat: byIndex ? (v) => fmt.int(v) : (v) => fmt.ms(v), yFormat: (v) => fmt.mib(v), yUnit: 1048576,
      markers: phases.map((p, i) => ({x: byIndex ? (indexOk ? phaseStartIdx[i] : approxIndex(p.start_ms)) : p.start_ms, label: phaseLabel(p)})),
      hoverLines,
      desc: `${fmt.int(r.event_count)} allocation events shown as ${fmt.int(pts.length)} points (each keeps its bucket's highest total); dashed lines mark where each phase starts.`,
      table: timelineTable(r, phaseAt),
    });
    svg = fig.querySelector('svg');
    if (svg) svg.addEventListener('pointerenter', loadEvents, {once: true});
    if (svg) svg.addEventListener('focus', loadEvents, {once: true});
    mount(chartBox, fig);
  };
  const radio = (value, text) => h('label', null, h('input', {type: 'radio', name: `mem-x-${r.index}`, id: `mem-x-${value}`, value, checked: mode.x === value,
    onchange: () => { mode.x = value; draw(); }}), ' ', text);
  draw();

  const m = r.measured || {}, e = r.estimate || {};
  const cmp = [['Parameters', m.parameters, e.parameters], ['Gradients', m.gradients, e.gradients],
    ['Optimizer state', m.optimizer_state, e.optimizer_state], ['Activations', m.activations_at_peak, e.activations],
    ['Total peak', m.total_peak, e.total]];
  const breakdown = Object.entries(r.breakdown_at_peak || {});
  const peak = r.peak_allocated_bytes;
  // Each MiB column with one number of decimals (86.582 beside 0.002, not 86.58).
  const diffOf = ([, mv, ev]) => (typeof mv === 'number' && typeof ev === 'number' ? mv - ev : null);
  const [largestF, breakdownF, measuredF, estimateF, diffF] = [(r.largest_allocations || []).map((a) => a.bytes),
    breakdown.map(([, b]) => b), cmp.map(([, mv]) => mv), cmp.map(([, , ev]) => ev), cmp.map(diffOf)].map(fmt.mibColumn);
  return [
    r.status === 'succeeded' ? null : h('p', {class: 'error', id: 'memory-run-error'}, `Run ${r.index} ${r.status}: ${r.error || ''} — the timeline ends at the failure.`),
    h('p', {class: 'common'}, h('strong', null, 'Peak '), `${fmt.mib(peak)} MiB in ${r.peak_phase || '?'}`,
      ' · ', h('strong', null, 'Residual stream '), `${fmt.mib(r.residual_stream_bytes)} MiB (B·T·d)`,
      r.reserved_peak_bytes ? [' · ', h('strong', null, 'Reserved peak '), `${fmt.mib(r.reserved_peak_bytes)} MiB`] : null,
      ' · ', `${fmt.int(r.event_count)} events`,
      ' · ', kept ? h('a', {href: `/v1/jobs/${job.id}/events?run=${r.index}`, download: `job-${job.id}-run-${r.index}-events.json`}, 'event list (JSON)')
        : h('span', {class: 'muted', id: 'memory-no-events'}, 'event list not kept (record_events false)')),
    h('section', {class: 'chart-box'},
      h('div', {class: 'field inline', role: 'radiogroup', 'aria-label': 'x axis'}, 'x axis: ', radio('time', 'time'), ' ', radio('index', 'event index')),
      chartBox),
    h('div', {class: 'two-col'},
      h('section', null, h('h3', null, 'Largest allocations'),
        h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'memory-largest'},
          h('caption', {class: 'sr-only'}, 'Largest allocations'),
          h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Name'), h('th', {scope: 'col'}, 'Category'),
            h('th', {scope: 'col', class: 'num'}, 'MiB'), h('th', {scope: 'col'}, 'Phase'))),
          h('tbody', null, (r.largest_allocations || []).map((a) => h('tr', null,
            h('td', null, a.name), h('td', null, a.category),
            h('td', {class: 'num', dataset: {value: a.bytes}, title: `${fmt.int(a.bytes)} bytes`}, largestF(a.bytes)),
            h('td', null, a.step >= 0 ? `${a.phase} ${a.step}` : a.phase)))))),
        fusedNote(r.largest_allocations || [])),
      h('section', null, h('h3', null, `Breakdown at the peak (${r.peak_phase || '?'})`),
        h('table', {class: 'results', id: 'memory-breakdown'},
          h('caption', {class: 'sr-only'}, `Live memory by category at the peak (${r.peak_phase || '?'})`),
          h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Category'), h('th', {scope: 'col', class: 'num'}, 'MiB'), h('th', {scope: 'col', class: 'num'}, 'Share'))),
          h('tbody', null, breakdown.map(([c, b]) => h('tr', {class: b ? '' : 'muted'},
            h('td', null, h('span', {class: `swatch c${Math.max(0, cats.indexOf(c)) % 8}`, 'aria-hidden': 'true'}), ' ', c),
            h('td', {class: 'num', dataset: {value: b}}, breakdownF(b)),
            h('td', {class: 'num'}, peak ? fmt.percent(b / peak) : '—'))))))),
    r.measured ? h('section', null, h('h3', null, 'Measured vs estimate'),
      h('table', {class: 'results', id: 'memory-estimate'},
        h('caption', {class: 'sr-only'}, 'Measured memory against the estimate'),
        h('thead', null, h('tr', null, h('th', {scope: 'col'}, ''), ['Measured (MiB)', 'Estimate (MiB)', 'Difference (MiB)', 'Difference'].map((c) => h('th', {scope: 'col', class: 'num'}, c)))),
        h('tbody', null, cmp.map((row) => { const [k, mv, ev] = row; return h('tr', null, h('th', {scope: 'row'}, k),
          h('td', {class: 'num', dataset: {value: mv}}, measuredF(mv)), h('td', {class: 'num', dataset: {value: ev}}, estimateF(ev)),
          h('td', {class: 'num'}, diffF(diffOf(row))),
          h('td', {class: 'num'}, typeof mv === 'number' && ev ? fmt.percent((mv - ev) / ev) : '—')); }))),
      r.estimate_notes ? h('p', {class: 'muted'}, r.estimate_notes) : null) : null,
  ];
}

function memoryView(job) {
  const runs = job.runs || [];
  const ok = runs.filter((r) => r.status === 'succeeded');
  const failed = runs.filter((r) => r.status !== 'succeeded');
  const seeds = h('div', {id: 'memory-seeds'});
  if (job.status === 'succeeded' || job.status === 'failed') {
    api.table(job.id).then((t) => {
      if (!t || !t.columns) return;
      mount(seeds, h('h2', null, 'Peak memory per context'), h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'memory-table'},
        h('caption', {class: 'sr-only'}, 'Peak memory per context: inference and train step'),
        h('thead', null, h('tr', null, t.columns.map((c) => h('th', {scope: 'col', class: /MiB|batch|context/.test(c) ? 'num' : ''}, c)))),
        h('tbody', null, t.rows.map((row) => h('tr', null, row.map((v, k) => h('td', {class: typeof v === 'number' ? 'num' : v === 'OOM' ? 'oom' : v === 'failed' ? 'error' : ''},
          endpointCell(v, (t.decimals || [])[k])))))))), tableExports(job.id, {}, 'peak memory table'));
    }).catch((e) => mount(seeds, h('p', {class: 'error'}, `seeds' table: ${e.message}`)));
  }
  // A failed point (out of memory) keeps its timeline up to the failure: it can be picked too.
  const shown = runs.filter((r) => r.status === 'succeeded' || (r.timeline && (r.timeline.points || []).length));
  const runSel = h('select', {id: 'memory-run'}, shown.map((r) => h('option', {value: r.index},
    `run ${r.index}: ${modelName(r)}, context ${r.context_length}, batch ${r.batch_size}, ${r.precision}, ${r.mode}` +
    (r.status === 'succeeded' ? '' : r.oom ? ' (out of memory)' : ` (${r.status})`))));
  const box = h('div');
  const drawRun = () => {
    const r = shown.find((x) => String(x.index) === runSel.value);
    mount(box, r ? memoryRunView(job, r) : null);
  };
  runSel.addEventListener('change', drawRun);
  drawRun();
  return [
    ok.length ? h('p', null, h('a', {class: 'button', id: 'memory-compare', href: link('/compare', {jobs: job.id})}, 'Compare these runs')) : null,
    seeds,
    failed.length ? h('ul', {class: 'error'}, failed.map((r) => h('li', null, `run ${r.index} (context ${r.context_length}, ${r.mode}): ${r.error || r.status}` +
      (r.peak_allocated_bytes ? ` — peak ${fmt.mib(r.peak_allocated_bytes)} MiB` : '')))) : null,
    shown.length ? h('section', null, h('h2', null, 'Allocation timeline'),
      h('div', {class: 'field inline'}, h('label', {for: 'memory-run'}, 'Run'), runSel), box) : null,
  ];
}

const OWN_EXPORTS = new Set(['numerics', 'benchmark', 'allreduce', 'memory', 'attention']);

const VIEWS = {numerics: numericsView, benchmark: benchmarkView, allreduce: allreduceView, memory: memoryView,
  attention: attentionView, profile: profileView};

export async function render(main, ctx) {
  const id = ctx.id;
  let timer = null, stopped = false, lastKey = '';
  const head = h('div');
  const body = h('div');
  mount(main, head, body);

  async function cancel() {
    try { cancelledToast(await api.cancel(id)); } catch (e) { toast(e.message, 'error'); }
    refresh();
  }

  function draw(job) {
    const env = job.environment || {};
    mount(head,
      h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '#/jobs'}, 'Jobs'), ' / ', `#${job.id}`),
      h('div', {class: 'page-head'},
        h('h1', null, `Job ${job.id} · ${job.kind}`, job.label ? h('span', {class: 'muted'}, ` — ${job.label}`) : null),
        h('span', {id: 'job-status', dataset: {status: job.status}}, statusBadge(job.status, job)),
        ACTIVE.has(job.status) && !cancelling(job) ? h('button', {type: 'button', onclick: cancel}, 'Cancel job') : null),
      cancelling(job) ? h('p', {class: 'muted', id: 'job-cancelling'},
        `Cancel asked for at ${fmt.when(job.cancel_requested_at)}: the job stops at its next check; a worker that does not stop within the grace period is stopped.`) : null,
      ACTIVE.has(job.status) ? h('p', null, progressCell(job)) : null,
      job.error ? h('p', {class: 'error', role: 'alert'}, job.error) : null,
      h('div', {class: 'two-col'},
        dl([['Created', fmt.when(job.created_at)], ['Started', fmt.when(job.started_at)], ['Finished', fmt.when(job.finished_at)],
          ['Duration', fmt.duration(job.started_at, job.finished_at)], ['Time limit', `${fmt.int(job.timeout_s)} s`],
          ['Worker', job.worker], ['Device', job.device]]),
        dl([['Device name', env.device_name], ['Device memory', env.device_memory_bytes ? fmt.bytes(env.device_memory_bytes) : null],
          ['Compute capability', env.compute_capability], ['Driver', env.driver_version], ['CUDA runtime', env.cuda_runtime_version],
          ['cuBLAS', env.cublas_version], ['Host', env.hostname], ['lmperf', env.lmperf_version]])));
    const key = `${job.status}|${(job.runs || []).length}`;
    if (key === lastKey) return;
    lastKey = key;
    const view = VIEWS[job.kind];
    // The kinds whose views put Copy as Markdown / Download CSV under each table; the others get the links here.
    const done = job.status === 'succeeded' && !OWN_EXPORTS.has(job.kind);
    mount(body,
      (job.runs || []).length ? (view ? view(job) : h('pre', {class: 'code'}, JSON.stringify(job.runs, null, 2))) : h('p', {class: 'muted'}, ACTIVE.has(job.status) ? 'No results yet.' : 'No runs.'),
      done ? h('p', {class: 'downloads'}, 'Table: ', ['md', 'csv', 'json'].map((f, i) =>
        [i ? ' · ' : '', h('a', {href: `/v1/jobs/${id}/table?format=${f}`, download: `job-${id}.${f}`}, f.toUpperCase())])) : null,
      h('details', null, h('summary', null, 'Spec'), h('pre', {class: 'code'}, JSON.stringify(job.spec, null, 2))),
      job.result ? h('details', null, h('summary', null, 'Result JSON'), h('pre', {class: 'code'}, JSON.stringify(job.result, null, 2))) : null);
  }

  async function refresh() {
    clearTimeout(timer);
    let job;
    try {
      job = await api.job(id);
    } catch (e) {
      if (stopped) return;
      if (e.status === 404) { mount(main, h('h1', null, `Job ${id}`), h('p', {class: 'error'}, e.message)); return; }
      // Nothing drawn yet (the daemon did not answer the first time): say so until it does.
      if (!lastKey) mount(head, h('h1', null, `Job ${id}`), h('p', {class: 'error', id: 'job-unreachable'}, `Could not load job ${id}: ${e.message}; retrying.`));
      else toast(`Could not refresh: ${e.message}`, 'error');
      timer = setTimeout(refresh, POLL_MS * 3);
      return;
    }
    if (stopped) return;
    draw(job);
    if (ACTIVE.has(job.status)) timer = setTimeout(refresh, POLL_MS);
  }
  await refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
