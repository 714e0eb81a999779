// Benchmark runs: the seeds' summary table, and the charts people read them
// by (step time vs context length, per-step times with warm-up, precision
// speedups). Used by the job page and the compare page.
import {h} from './dom.js';
import * as fmt from './format.js';
import {lineChart, barChart} from './chart.js';
import {modelName, MODEL_PRESETS} from './kinds.js';

export const PHASES = [
  {key: 'forward', step: 'forward_ms', label: 'Fwd', long: 'forward'},
  {key: 'backward', step: 'backward_ms', label: 'Bwd', long: 'backward'},
  {key: 'optimizer', step: 'optimizer_ms', label: 'Opt', long: 'optimizer'},
  {key: 'total', step: 'total_ms', label: 'Total', long: 'whole step'},
];

// Config columns of a run, in the seeds' order; every field a run's spec sets,
// so that runs that differ in one show it as a column.
export const CONFIG = [
  {key: 'model', label: 'Model', get: (r) => modelName(r)},
  {key: 'context_length', label: 'Context', get: (r) => r.context_length, num: true},
  {key: 'batch_size', label: 'Batch', get: (r) => r.batch_size, num: true},
  {key: 'vocab_size', label: 'Vocab', get: (r) => r.vocab_size, num: true},
  {key: 'precision', label: 'Precision', get: (r) => r.precision},
  {key: 'mode', label: 'Mode', get: (r) => r.mode},
  {key: 'warmup_steps', label: 'Warm-up steps', get: (r) => r.warmup_steps, num: true},
  {key: 'measure_steps', label: 'Measured steps', get: (r) => r.measure_steps, num: true},
  {key: 'attention', label: 'Attention', get: (r) => r.attention},
  {key: 'graphs', label: 'CUDA graphs', get: (r) => (r.graphs ? 'yes' : 'no')},
  {key: 'optimizer_in_backward', label: 'Optimizer in backward', get: (r) => (r.optimizer_in_backward ? 'yes' : 'no')},
  {key: 'seed', label: 'Seed', get: (r) => r.seed, num: true},
];

// The model's shape, as the seeds' tables (and the table endpoint) list it right
// after the model's name: a preset's too, so a table says what "small" is.
export const SHAPE = [
  {key: 'd_model', label: 'd_model', get: (r) => r.d_model, num: true},
  {key: 'd_ff', label: 'd_ff', get: (r) => r.d_ff, num: true},
  {key: 'num_layers', label: 'Layers', get: (r) => r.num_layers, num: true},
  {key: 'num_heads', label: 'Heads', get: (r) => r.num_heads, num: true},
];

// Config columns with the shape's after Model: columns, a subset of CONFIG in its order.
export function withShape(columns) {
  return columns.flatMap((c) => (c.key === 'model' ? [c, ...SHAPE] : [c]));
}

const PRESET_ORDER = new Map(MODEL_PRESETS.map((p, i) => [p.name, i]));
const PRECISION_ORDER = ['fp32', 'tf32', 'bf16', 'fp16'];

// Sort key: model (preset order, then by size), context, batch, precision.
export function compareRuns(a, b) {
  const ma = modelName(a), mb = modelName(b);
  const pa = PRESET_ORDER.has(ma) ? PRESET_ORDER.get(ma) : 100 + (a.parameters || 0) / 1e12;
  const pb = PRESET_ORDER.has(mb) ? PRESET_ORDER.get(mb) : 100 + (b.parameters || 0) / 1e12;
  return pa - pb || ma.localeCompare(mb) || a.context_length - b.context_length || a.batch_size - b.batch_size ||
    PRECISION_ORDER.indexOf(a.precision) - PRECISION_ORDER.indexOf(b.precision) ||
    String(a.mode).localeCompare(String(b.mode)) || String(a.attention).localeCompare(String(b.attention));
}

// Phases with data in any of the runs (forward-only runs have no bwd/opt).
export function phasesPresent(runs) {
  return PHASES.filter((p) => runs.some((r) => r.stats && r.stats[p.key]));
}

// Decimals of each phase's column over these runs: {forward: 2, optimizer: 3, …},
// so that a column reads 0.763 ± 0.029 beside 6.240 ± 5.370, not beside 6.24 ± 5.37.
export function phaseDigits(runs, phases = PHASES) {
  return Object.fromEntries(phases.map((p) => [p.key,
    fmt.columnDigits(runs.map((r) => r.stats && r.stats[p.key] ? r.stats[p.key].mean_ms : null), fmt.msDigits)]));
}

// A right-aligned "mean ± std" cell carrying the raw numbers for tests and export;
// digits: the column's decimals (phaseDigits), else the mean's own.
export function statCell(stat, extraClass = '', digits) {
  if (!stat) return h('td', {class: 'num muted ' + extraClass}, '—');
  return h('td', {class: 'num ' + extraClass, dataset: {mean: stat.mean_ms, std: stat.std_ms}, title:
    `median ${fmt.ms(stat.median_ms)} ms · min ${fmt.ms(stat.min_ms)} · max ${fmt.ms(stat.max_ms)}`},
  fmt.msPm(stat.mean_ms, stat.std_ms, digits));
}

// One series per phase with data and the whole step; a run of one phase (the
// forward mode) has one series, that phase being the whole step (the daemon's
// total is the sum of the phases), not two lines drawn on top of each other.
export function stepSeries(run) {
  const steps = run.steps || [];
  const present = PHASES.filter((p) => steps.some((st) => typeof st[p.step] === 'number'));
  const parts = present.filter((p) => p.key !== 'total');
  const shown = parts.length === 1 ? parts : present;
  return shown.map((p) => ({
    name: parts.length === 1 ? `${p.long} (the whole step)` : p.long,
    points: steps.filter((st) => typeof st[p.step] === 'number').map((st) => ({x: st.step, y: st[p.step], flag: !!st.warmup})),
  }));
}

// Each run's speedup over the fp32 run of its job at the same point, as the
// table endpoint's "Speedup vs fp32 (×)" (benchmark_summary.speedup_vs_fp32,
// schema/0025_host_load.sql): the fp32 run's mean total over this run's, the peer
// the same model and shape, context, batch, vocab, mode, attention, warm-up and
// measured steps and optimizer placement, both succeeded. runs: one job's; a Map
// run → speedup (null without a peer), and whether the column shows: some run in
// another precision has a peer (as the endpoint decides).
export const SPEEDUP_VS_FP32_LABEL = 'Speedup vs fp32 (×)';
const FP32_PEER_KEYS = ['model', 'd_model', 'd_ff', 'num_layers', 'num_heads', 'context_length', 'batch_size', 'vocab_size',
  'mode', 'attention', 'warmup_steps', 'measure_steps'];
export function speedupsVsFp32(runs) {
  const total = (r) => (r.status === 'succeeded' && r.stats && r.stats.total ? r.stats.total.mean_ms : null);
  const point = (r) => JSON.stringify([...FP32_PEER_KEYS.map((k) => r[k] ?? null), !!r.optimizer_in_backward]);
  const fp32 = new Map();
  for (const r of runs) if (r.precision === 'fp32' && total(r) > 0 && !fp32.has(point(r))) fp32.set(point(r), total(r));
  const speedups = new Map(runs.map((r) => [r, fp32.has(point(r)) && total(r) > 0 ? fp32.get(point(r)) / total(r) : null]));
  return {speedups, shown: runs.some((r) => r.precision !== 'fp32' && speedups.get(r) !== null)};
}

// Other processes on the host during a run's measured steps (the run's
// host_other_cpu_pct and host_idle_cpu_pct, % of its host_cpus): whether they
// disturbed the run is the daemon's decision (host_disturbed: daemon/host_load.h's
// host_load_disturbed), the rule by which its table gains "Host Busy (%)"; the
// test checks that the page's column comes and goes with the API table's.
export const HOST_BUSY_LABEL = 'Host Busy (%)';
const isNum = (x) => typeof x === 'number' && Number.isFinite(x);
export function hostDisturbed(r) {
  return r.host_disturbed === true;
}

// Whether a table of these runs has the Host Busy (%) column: some run was disturbed.
export function hostBusyShown(runs) { return runs.some(hostDisturbed); }

// A run's warnings (strings: what may make its figures unreliable).
export const warningsOf = (r) => (Array.isArray(r.warnings) ? r.warnings.filter((w) => typeof w === 'string' && w) : []);

// The Host Busy (%) cell: other processes' share, whole percent as the table
// endpoint prints it; the idle share and the host's CPUs (or why unknown) on hover.
export function hostBusyCell(r) {
  const pct = r.host_other_cpu_pct;
  const title = isNum(pct) ? `other processes ${fmt.fixed(pct, 1)} % of the host's ${r.host_cpus ?? '?'} CPUs, ` +
    `${isNum(r.host_idle_cpu_pct) ? fmt.fixed(r.host_idle_cpu_pct, 1) : '?'} % idle, during the measured steps`
    : r.host_other_cpu_note || 'not measured';
  return h('td', {class: `num host-busy${hostDisturbed(r) ? ' disturbed' : ''}`, dataset: {key: 'host_busy', value: isNum(pct) ? pct : ''}, title},
    isNum(pct) ? fmt.fixed(pct, 0) : '—');
}

// A ⚠ after a run's number when it has warnings (the text on hover and for screen readers).
export function warningMark(r) {
  const ws = warningsOf(r);
  return ws.length ? h('span', {class: 'warn-mark', title: ws.join('\n')}, ' ⚠', h('span', {class: 'sr-only'}, ` warning: ${ws.join('; ')}`)) : null;
}

// The runs' warnings as a list above their table: which run (describe(r) names
// it) and what each warning says. Null when no run has one.
export function runWarnings(runs, describe, id) {
  const warned = runs.filter((r) => warningsOf(r).length);
  if (!warned.length) return null;
  return h('div', {class: 'run-warnings', id, role: 'note'},
    h('p', null, h('strong', null, `⚠ ${warned.length} of ${runs.length} run${runs.length === 1 ? '' : 's'} may have unreliable times`)),
    h('ul', null, warned.flatMap((r) => warningsOf(r).map((w) => h('li', {dataset: {run: r.index}}, h('strong', null, describe(r)), ': ', w)))));
}

// Per-step times of one run, warm-up steps flagged and shaded.
export function stepChart(run, title) {
  const steps = run.steps || [];
  const warm = steps.filter((st) => st.warmup).map((st) => st.step);
  return lineChart({
    title: title || 'Time per step (warm-up steps flagged)',
    series: stepSeries(run),
    xLabel: 'step', yLabel: 'time (ms)',
    yFormat: (v) => fmt.ms(v), xFormat: (v) => String(v),
    flagLabel: 'warm-up step', legendAlways: true,
    band: warm.length ? [Math.min(...warm) - 0.5, Math.max(...warm) + 0.5, 'warm-up'] : null,
    desc: warm.length ? `${warm.length > 1 ? `${warm.length} warm-up steps (squares) are` : '1 warm-up step (square) is'} excluded from the statistics.` : 'No warm-up steps: the first steps count in the statistics.',
  });
}

// Mean step time vs context length, one series per model (and precision, etc. when they vary).
export function contextChart(runs, {phase = 'total', logX = false, logY = false} = {}) {
  const p = PHASES.find((x) => x.key === phase);
  const varying = CONFIG.filter((c) => c.key !== 'model' && c.key !== 'context_length' && new Set(runs.map(c.get)).size > 1);
  const seriesName = (r) => [modelName(r), ...varying.map((c) => `${c.label.toLowerCase()} ${c.get(r)}`)].join(' · ');
  // The same configuration from several jobs: one series per job.
  const seen = new Set();
  const perJob = runs.some((r) => {
    const k = `${seriesName(r)}|${r.context_length}`;
    return seen.has(k) || !seen.add(k);
  });
  const groups = new Map();
  for (const r of [...runs].sort(compareRuns)) {
    if (!r.stats || !r.stats[phase]) continue;
    const name = seriesName(r) + (perJob && r.job_id !== undefined ? ` · job #${r.job_id}` : '');
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push({x: r.context_length, y: r.stats[phase].mean_ms, err: r.stats[phase].std_ms});
  }
  return lineChart({
    title: `${p.long[0].toUpperCase() + p.long.slice(1)} time vs context length`,
    series: [...groups].map(([name, points]) => ({name, points: points.sort((a, b) => a.x - b.x)})),
    xLabel: 'context length (tokens)', yLabel: `${p.long} mean (ms)`, logX, logY, xBase: 2,
    xFormat: (v) => String(v), yFormat: (v) => fmt.ms(v),
  });
}

// Speedup of each precision over a reference precision, per model × context × rest.
export function precisionChart(runs, {phase = 'total', reference = 'fp32'} = {}) {
  const others = CONFIG.filter((c) => c.key !== 'precision');
  // Per configuration and precision the newest run (highest job id) counts.
  const byConfig = new Map();
  const ordered = [...runs].sort(compareRuns).sort((a, b) => (a.job_id ?? 0) - (b.job_id ?? 0));
  for (const r of ordered) {
    if (!r.stats || !r.stats[phase]) continue;
    const key = others.map((c) => c.get(r)).join('|');
    if (!byConfig.has(key)) byConfig.set(key, {run: r, byPrec: new Map()});
    byConfig.get(key).byPrec.set(r.precision, r.stats[phase].mean_ms);
  }
  const varying = others.filter((c) => c.key !== 'model' && c.key !== 'context_length' && new Set(runs.map(c.get)).size > 1);
  const groups = [];
  for (const {run, byPrec} of byConfig.values()) {
    const ref = byPrec.get(reference);
    if (!ref) continue;
    const bars = [...byPrec].filter(([prec]) => prec !== reference)
      .map(([prec, t]) => ({name: prec, value: ref / t}));
    if (bars.length)
      groups.push({label: [modelName(run), run.context_length, ...varying.map((c) => c.get(run))].join(' · '), bars});
  }
  return barChart({
    title: `Speedup over ${reference} (${PHASES.find((x) => x.key === phase).long})`,
    groups, yLabel: `speedup vs ${reference} (×)`, reference: 1, yFormat: (v) => fmt.ratio(v),
    emptyText: `Pick runs of the same shapes in ${reference} and another precision to see speedups.`,
    desc: 'Bars above the line at 1× are faster than the reference.',
  });
}
