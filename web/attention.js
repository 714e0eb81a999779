// The attention job's page: the table endpoint's seeds' table (naive vs flash
// per seq × d), every point (forward, backward, fwd+bwd medians, memory before
// the backward, TFLOP/s, the SM clock seen; OOM rows; failed points with their reason), and time vs
// sequence length on log axes, one line per (impl, d_head), OOM points as ✕.
import {h, mount} from './dom.js';
import * as fmt from './format.js';
import {lineChart} from './chart.js';
import {endpointTable} from './table.js';

export const METRICS = [
  {key: 'fwd_bwd_ms', label: 'forward+backward'},
  {key: 'fwd_ms', label: 'forward'},
  {key: 'bwd_ms', label: 'backward'},
];

const IMPL_ORDER = {naive: 0, flash: 1};
const byPoint = (a, b) => a.dtype.localeCompare(b.dtype) || a.d_head - b.d_head || a.seq_len - b.seq_len ||
  (IMPL_ORDER[a.impl] ?? 9) - (IMPL_ORDER[b.impl] ?? 9);

const isOom = (r) => r.status === 'succeeded' && r.oom === true;
const measured = (r) => r.status === 'succeeded' && !r.oom && typeof r.fwd_ms === 'number';

// Series of the chart: one per (impl, dtype when several, d_head), in that order.
export function attentionSeries(runs, metric) {
  const dtypes = new Set(runs.map((r) => r.dtype));
  const key = (r) => `${r.impl}|${r.dtype}|${r.d_head}`;
  const name = (r) => `${r.impl}${dtypes.size > 1 ? ' ' + r.dtype : ''} d=${r.d_head}`;
  const groups = new Map();
  for (const r of [...runs].sort((a, b) => (IMPL_ORDER[a.impl] ?? 9) - (IMPL_ORDER[b.impl] ?? 9) || byPoint(a, b))) {
    if (!measured(r) && !isOom(r)) continue;
    if (!groups.has(key(r))) groups.set(key(r), {name: name(r), points: [], marks: []});
    const g = groups.get(key(r));
    if (isOom(r)) g.marks.push({x: r.seq_len, label: `${name(r)}, seq ${fmt.int(r.seq_len)}: out of memory` +
      (r.oom_request_bytes ? ` (asked ${fmt.bytes(r.oom_request_bytes)})` : '')});
    else if (typeof r[metric] === 'number')
      g.points.push({x: r.seq_len, y: r[metric], label: `${name(r)}, seq ${fmt.int(r.seq_len)}: ` +
        (metric.endsWith('_bytes') ? `${fmt.mib(r[metric])} MiB` : `${fmt.ms(r[metric])} ms`)});
  }
  return [...groups.values()];
}

export function attentionView(job) {
  const runs = [...(job.runs || [])].sort(byPoint);
  const first = runs[0] || {};
  const dtypes = new Set(runs.map((r) => r.dtype));
  const nOk = runs.filter(measured).length, nOom = runs.filter(isOom).length;
  const failed = runs.filter((r) => r.status !== 'succeeded');
  const reasons = [...new Set(failed.map((r) => r.error || r.status))];
  // each column one number of decimals, from its smallest value (as the table endpoint's columns)
  const col = (key, digitsOf = fmt.msDigits, scale = 1) => fmt.column(runs.filter(measured).map((r) => r[key] / scale), digitsOf);
  const [fwdF, bwdF, fbF] = ['fwd_ms', 'bwd_ms', 'fwd_bwd_ms'].map((k) => col(k));
  const memF = col('mem_before_bwd_bytes', fmt.mibDigits, 1048576), mibF = (x) => memF(x / 1048576);
  const [tfF, tbF, tfbF] = ['fwd_tflops', 'bwd_tflops', 'fwd_bwd_tflops'].map((k) => col(k));
  // the SM clock NVML saw during the timed loops; ⚠ = a power cap or thermal slowdown was reported
  const clockCell = (r) => typeof r.sm_clock_mhz_min !== 'number' ? h('td', {class: 'num'}, '—')
    : h('td', {class: 'num', title: `highest board power ${Math.round(r.power_w_max)} W; waited ${Math.round(r.settle_ms)} ms for the power to settle` +
        (r.clock_slowdown ? '; NVML reported a power cap or slowdown during the loops' : '')},
      `${r.sm_clock_mhz_min} / ${Math.round(r.sm_clock_mhz_mean)}${r.clock_slowdown ? ' ⚠' : ''}`);
  const cell = (v, f, cls = 'num') => h('td', {class: cls, dataset: typeof v === 'number' ? {value: v} : undefined}, f(v));

  const pointsTable = h('table', {class: 'results', id: 'attention-runs'},
    h('caption', {class: 'sr-only'}, 'Every attention point: times, memory before the backward, TFLOP/s'),
    h('thead', null, h('tr', null,
      h('th', {scope: 'col', class: 'num'}, 'Run'), h('th', {scope: 'col'}, 'Impl'),
      dtypes.size > 1 ? h('th', {scope: 'col'}, 'dtype') : null,
      ['Seq', 'd', 'Forward (ms)', 'Backward (ms)', 'Fwd+bwd (ms)', 'Memory before bwd (MiB)',
        'Fwd TFLOP/s', 'Bwd TFLOP/s', 'Fwd+bwd TFLOP/s', 'SM clock (MHz) min / mean'].map((c) => h('th', {scope: 'col', class: 'num'}, c)))),
    h('tbody', null, runs.map((r) => h('tr', {class: isOom(r) ? 'oom' : r.status !== 'succeeded' ? 'warn' : '', dataset: {run: r.index, status: isOom(r) ? 'oom' : r.status}},
      h('td', {class: 'num'}, String(r.index)), h('td', null, r.impl),
      dtypes.size > 1 ? h('td', null, r.dtype) : null,
      h('td', {class: 'num'}, fmt.int(r.seq_len)), h('td', {class: 'num'}, String(r.d_head)),
      measured(r)
        ? [cell(r.fwd_ms, fwdF), cell(r.bwd_ms, bwdF), cell(r.fwd_bwd_ms, fbF), cell(r.mem_before_bwd_bytes, mibF),
          cell(r.fwd_tflops, tfF), cell(r.bwd_tflops, tbF), cell(r.fwd_bwd_tflops, tfbF), clockCell(r)]
        : isOom(r)
          ? h('td', {colspan: 8, class: 'oom'}, h('strong', null, 'OOM'),
            r.oom_request_bytes ? ` — an allocation of ${fmt.bytes(r.oom_request_bytes)} did not fit` : ' — did not fit in memory')
          : h('td', {colspan: 8, class: 'error'}, `failed: ${r.error || r.status}`)))));

  // "1 pass", "100 passes", "1 warm-up pass"
  const passes = (n, what = '') => `${n ?? '?'} ${what}pass${n === 1 ? '' : 'es'}`;
  const metricSel = h('select', {id: 'attention-metric'}, METRICS.map((m) => h('option', {value: m.key}, m.label)));
  const chartBox = h('div', {id: 'attention-chart'});
  const draw = () => {
    const m = METRICS.find((x) => x.key === metricSel.value);
    mount(chartBox, lineChart({
      title: `Attention ${m.label} time vs sequence length${first.causal ? ' (causal)' : ''}`,
      series: attentionSeries(runs, m.key), xLabel: 'sequence length', yLabel: `${m.label} (ms)`,
      logX: true, xBase: 2, logY: true, xFormat: (v) => fmt.int(v), yFormat: (v) => fmt.ms(v), markLabel: 'OOM',
      marksOnlyText: 'every point ran out of memory',
      desc: `median of ${passes(first.passes)} (each timed alone) after ${passes(first.warmup, 'warm-up ')}; batch ${first.batch}, ${first.heads} head${first.heads === 1 ? '' : 's'}; one line per implementation and head dimension; ✕ on the top edge: out of memory.`,
    }));
  };
  metricSel.addEventListener('change', draw);
  draw();
  // Memory before the backward: T² for naive (the scores), T for flash.
  const memSeries = attentionSeries(runs, 'mem_before_bwd_bytes');
  for (const sr of memSeries) for (const p of sr.points) p.y /= 1048576; // MiB, so log ticks fall on 1, 10, 100 MiB
  const memChart = memSeries.some((sr) => sr.points.length) ? h('div', {id: 'attention-memory-chart'}, lineChart({
    title: 'Memory allocated before the backward vs sequence length', series: memSeries,
    xLabel: 'sequence length', yLabel: 'allocated (MiB)', logX: true, xBase: 2, logY: true,
    xFormat: (v) => fmt.int(v), markLabel: 'OOM',
    desc: 'the naive implementation keeps the T×T scores (grows with T²), the flash kernels only the output and logsumexp (grows with T).',
  })) : null;

  return [
    h('p', {class: 'common', id: 'attention-summary'},
      h('strong', null, 'Batch '), String(first.batch), ' · ', h('strong', null, 'Heads '), String(first.heads),
      dtypes.size === 1 ? [' · ', h('strong', null, 'dtype '), first.dtype] : null,
      ' · ', h('strong', null, 'Causal '), first.causal ? 'yes' : 'no',
      ' · ', h('strong', null, 'Passes '), `${first.passes} after ${first.warmup} warm-up`,
      first.device ? [' · ', h('strong', null, 'Device '), first.device] : null,
      ' · ', `${runs.length} points: ${nOk} measured, ${nOom} out of memory, ${failed.length} failed`),
    reasons.length ? h('ul', {class: 'error', id: 'attention-failed'}, reasons.map((why) => {
      const rs = failed.filter((r) => (r.error || r.status) === why);
      return h('li', null, `${rs.length} point${rs.length > 1 ? 's' : ''} failed (${[...new Set(rs.map((r) => r.impl))].join(', ')}): ${why}`);
    })) : null,
    endpointTable(job, {id: 'attention-table', title: 'Naive vs flash per sequence length and head dimension', what: 'naive vs flash table'}),
    h('section', {class: 'chart-box'},
      h('div', {class: 'field inline'}, h('label', {for: 'attention-metric'}, 'Time of'), metricSel), chartBox),
    memChart,
    h('h2', null, 'Every point'),
    h('div', {class: 'scroll'}, pointsTable),
    first.flop_convention ? h('p', {class: 'muted'}, `TFLOP/s: ${first.flop_convention}.`) : null,
  ];
}
