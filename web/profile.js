// The profile job's page, per traced run (daemon/kind_profile.c's run shape):
// the overhead and totals, how the steps ran (CUDA-graph replays or eager),
// the Chrome trace download, the tracing overhead per phase (CUDA events,
// untraced vs traced), the computed answers as a short list, the nsys-style
// kernel summary of one NVTX range (range picker, name filter, sortable
// columns) and the per-op roofline table.
import {h, mount} from './dom.js';
import * as fmt from './format.js';
import {modelName} from './kinds.js';
import {sortableTable} from './table.js';

export const ALL_RANGE = '(all)';
const RANGE_ORDER = [ALL_RANGE, 'step', 'forward', 'backward', 'optimizer'];

// Range names of a run in reading order: the fixed ones, then "layer N"
// numerically, then the rest by name.
export function rangeNames(run) {
  const names = [...new Set((run.kernel_summary || []).map((k) => k.range))];
  const rank = (n) => { const i = RANGE_ORDER.indexOf(n); return i >= 0 ? i : RANGE_ORDER.length; };
  return names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b, 'en', {numeric: true}));
}

// A demangled kernel name as the table shows it: without the return type and
// the parameter list ("void rope_vec_kernel<float>(float*, int)" →
// "rope_vec_kernel<float>"); the full name is one click away and in the cell's title.
export function shortKernelName(name) {
  let s = name.replace(/^void\s+/, '');
  if (s.endsWith(')')) {
    let depth = 0;
    for (let i = s.length - 1; i >= 0; i--) {
      if (s[i] === ')') depth++;
      else if (s[i] === '(' && --depth === 0) { s = s.slice(0, i); break; }
    }
  }
  return s.trim() || name;
}

// A long name as text pieces with <wbr> where a line may break: after "_", ",",
// "::" and before "<" and "(" (sm80_xmma_gemm_…_tilesize64x64x8_…, template
// arguments, parameters), never inside a word.
function breakable(name) {
  return name.split(/(?<=_|,|::)|(?=[<(])/).flatMap((piece, i) => (i ? [h('wbr'), piece] : [piece]));
}

// The Kernel cell's name: the short name, expanding to the full one when they differ.
function kernelName(name) {
  const short = shortKernelName(name);
  if (short === name) return h('span', {class: 'kname'}, breakable(name));
  return h('details', {class: 'kname'}, h('summary', null, breakable(short), h('span', {class: 'sr-only'}, ' (full name)')),
    h('code', {class: 'kfull'}, breakable(name)));
}

const ms = (ns) => (typeof ns === 'number' ? fmt.ms(ns / 1e6) : '—');

// Non-GEMM kernels above this share of a range (daemon/kind_profile.c's PROFILE_NOTEWORTHY_PCT, for the step).
const NOTEWORTHY_PCT = 2;

// The non-GEMM kernels of one range above NOTEWORTHY_PCT of its kernel time, largest first
// ({kernel, share_pct}, as the answers' non_gemm_above_2pct): the seeds' question (c) asks it of the forward pass.
export function nonGemmAbove(run, range) {
  return (run.kernel_summary || []).filter((k) => k.range === range && !k.is_gemm && k.share_pct > NOTEWORTHY_PCT)
    .sort((x, y) => y.share_pct - x.share_pct).map((k) => ({kernel: k.kernel, share_pct: k.share_pct}));
}

function answersList(run) {
  const a = run.answers;
  if (!a) return null;
  const code = (t) => h('code', {class: 'kernel', title: t}, t);
  const items = [];
  if (a.top_forward_kernel)
    items.push(h('li', {dataset: {answer: 'top_forward'}}, h('strong', null, 'Top kernel of the forward pass: '), code(a.top_forward_kernel),
      ` — ${+a.top_forward_calls_per_forward.toFixed(2)} calls per forward, ${fmt.pct(a.top_forward_share_pct)} of the forward's kernel time`));
  if (a.top_fwd_bwd_kernel)
    items.push(h('li', {dataset: {answer: 'top_fwd_bwd'}}, h('strong', null, 'Top kernel of forward+backward: '),
      a.top_forward_also_top_fwd_bwd ? 'the same kernel' : code(a.top_fwd_bwd_kernel)));
  if (typeof a.gemm_share_forward_pct === 'number' || typeof a.gemm_share_step_pct === 'number')
    items.push(h('li', {dataset: {answer: 'gemm_share'}}, h('strong', null, 'GEMM share of kernel time: '),
      `forward only ${fmt.pct(a.gemm_share_forward_pct)}`,
      typeof a.gemm_share_step_pct === 'number' ? ` · whole train step ${fmt.pct(a.gemm_share_step_pct)}` : ''));
  const kernelList = (ks) => (ks.length ? h('ul', null, ks.map((k) => h('li', null, code(k.kernel), ` ${fmt.pct(k.share_pct)}`))) : 'none');
  if ((run.kernel_summary || []).some((k) => k.range === 'forward'))
    items.push(h('li', {dataset: {answer: 'non_gemm_forward'}}, h('strong', null, `Non-GEMM kernels above ${NOTEWORTHY_PCT} % of the forward pass: `),
      kernelList(nonGemmAbove(run, 'forward'))));
  if (run.mode !== 'forward')
    items.push(h('li', {dataset: {answer: 'non_gemm'}}, h('strong', null, `Non-GEMM kernels above ${NOTEWORTHY_PCT} % of the step: `),
      kernelList([...(a.non_gemm_above_2pct || [])].sort((x, y) => y.share_pct - x.share_pct))));
  const at = a.attention;
  if (at && (at.softmax_ns || at.matmul_ns))
    items.push(h('li', {dataset: {answer: 'attention'}}, h('strong', null, 'Attention (forward, per layer): '),
      `softmax ${fmt.usFromNs(at.softmax_ns)} µs, the two matmuls ${fmt.usFromNs(at.matmul_ns)} µs — `,
      `time ratio matmul : softmax ${fmt.ratio(at.time_ratio_matmul_to_softmax)} against a FLOP ratio of ${fmt.ratio(at.flop_ratio_matmul_to_softmax)}`,
      at.note ? h('span', {class: 'muted'}, ` (${at.note})`) : null));
  else if (at && at.fused)
    items.push(h('li', {dataset: {answer: 'attention'}}, h('strong', null, 'Attention (forward, per layer): '),
      `scores, softmax and values in one kernel ${fmt.usFromNs(at.fused_ns)} µs`,
      at.note ? h('span', {class: 'muted'}, ` (${at.note})`) : null));
  return h('ul', {class: 'answers', id: 'profile-answers'}, items);
}

function rooflineTable(run) {
  const rows = run.roofline || [];
  if (!rows.length) return h('p', {class: 'muted'}, 'No roofline rows (none of the attention ranges were traced).');
  const num = (v, f) => h('td', {class: 'num', dataset: typeof v === 'number' ? {value: v} : undefined}, f(v));
  // Attainable rate at this intensity: min(compute roof, intensity × bandwidth).
  const roof = (r) => (r.peak_tflops && r.peak_gbps ? Math.min(r.peak_tflops, (r.flops / r.bytes) * r.peak_gbps / 1e3) : null);
  // Each column with one number of decimals: 3 significant digits of its smallest value (0.101 beside 123.830).
  const col = (f, digitsOf = fmt.sigDigits) => fmt.column(rows.map(f), digitsOf);
  const [gflopF, mbF, intensityF, timeF, tflopsF, gbpsF, peakTF, peakGF] = [[(r) => r.flops / 1e9], [(r) => r.bytes / 1e6], [(r) => r.flops / r.bytes],
    [(r) => r.time_ns / 1e3, fmt.usDigits], [(r) => r.tflops], [(r) => r.gbps], [(r) => r.peak_tflops], [(r) => r.peak_gbps]].map(([f, d]) => col(f, d));
  return h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'profile-roofline'},
    h('caption', {class: 'sr-only'}, 'Roofline per op'),
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Op'),
      ['Instances', 'GFLOP', 'MB moved', 'FLOP/byte', 'Time (µs)', 'TFLOP/s', 'GB/s', 'Peak TFLOP/s', 'Peak GB/s', '% of roof']
        .map((c) => h('th', {scope: 'col', class: 'num'}, c)), h('th', {scope: 'col'}, 'Bound'))),
    h('tbody', null, rows.map((r) => h('tr', null, h('th', {scope: 'row'}, r.op),
      num(r.instances, fmt.int), num(r.flops, (v) => gflopF(v / 1e9)), num(r.bytes, (v) => mbF(v / 1e6)),
      num(r.flops / r.bytes, intensityF), num(r.time_ns, (v) => timeF(v / 1e3)), num(r.tflops, tflopsF), num(r.gbps, gbpsF),
      num(r.peak_tflops, peakTF), num(r.peak_gbps, peakGF),
      num(roof(r) ? r.tflops / roof(r) : null, (v) => fmt.percent(v)),
      h('td', null, r.bound || '—'))))));
}

// jobId: the job's id, for the range's table downloads (GET /v1/jobs/{id}/table?run=&range=).
function kernelSection(jobId, run) {
  const ranges = rangeNames(run);
  const dflt = ranges.includes('forward') ? 'forward' : ranges[0];
  const rangeSel = h('select', {id: 'profile-range'}, ranges.map((n) => {
    const k = run.kernel_summary.find((x) => x.range === n);
    return h('option', {value: n, selected: n === dflt}, `${n} (${fmt.int(k.range_instances)}×)`);
  }));
  const filter = h('input', {type: 'search', id: 'profile-filter', placeholder: 'kernel name…'});
  const box = h('div');
  // Each column's decimals over the range's kernels (set by draw): 8,047.40 beside 6.72, not 8,047.4.
  let colF = {};
  const columns = [
    {key: 'instances', label: 'Instances', num: true, get: (k) => k.instances, cell: (k) => fmt.int(k.instances)},
    {key: 'per_range', label: 'Per range', num: true, get: (k) => k.instances / k.range_instances,
      cell: (k) => colF.per_range(k.instances / k.range_instances), title: () => 'instances per instance of the range'},
    ...[['total_ns', 'Total (µs)'], ['avg_ns', 'Avg (µs)'], ['med_ns', 'Med (µs)'], ['min_ns', 'Min (µs)'], ['max_ns', 'Max (µs)'], ['std_ns', 'StdDev (µs)']]
      .map(([key, label]) => ({key, label, num: true, get: (k) => k[key], cell: (k) => colF[key](k[key] / 1e3), title: (k) => `${fmt.int(k[key])} ns`})),
    {key: 'share_pct', label: 'Range %', num: true, get: (k) => k.share_pct, cell: (k) => fmt.pct(k.share_pct)},
    // Last, as in nsys: the names are long.
    {key: 'kernel', label: 'Kernel', get: (k) => k.kernel, class: 'kernel', title: (k) => k.kernel,
      cell: (k) => [k.is_gemm ? h('span', {class: 'tag gemm'}, 'GEMM') : null, kernelName(k.kernel)]},
  ];
  let sort = {key: 'total_ns', dir: 'desc'};
  const draw = () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const rows = run.kernel_summary.filter((k) => k.range === rangeSel.value && words.every((w) => k.kernel.toLowerCase().includes(w)));
    const all = run.kernel_summary.filter((k) => k.range === rangeSel.value);
    const total = all.reduce((a, k) => a + k.total_ns, 0);
    const perRange = all.map((k) => k.instances / k.range_instances);
    colF = {per_range: fmt.column(perRange, () => (perRange.every(Number.isInteger) ? 0 : 2)),
      ...Object.fromEntries(['total_ns', 'avg_ns', 'med_ns', 'min_ns', 'max_ns', 'std_ns'].map((key) => [key, fmt.column(all.map((k) => k[key] / 1e3), fmt.usDigits)]))};
    const old = box.querySelector('th[aria-sort]');
    if (old) sort = {key: old.dataset.key, dir: old.getAttribute('aria-sort') === 'ascending' ? 'asc' : 'desc'};
    mount(box,
      h('p', {class: 'common', id: 'profile-range-facts'}, `${rangeSel.value}: ${fmt.int(all[0] ? all[0].range_instances : 0)} instance(s), `,
        `${fmt.int(all.length)} distinct kernels, ${fmt.int(all.reduce((a, k) => a + k.instances, 0))} launches, kernel time ${ms(total)} ms`,
        rows.length < all.length ? ` · ${rows.length} shown` : ''),
      h('div', {class: 'scroll'}, sortableTable(columns, {id: 'profile-kernels', rows, sort, empty: 'No kernel matches.',
        rowAttrs: (k) => ({dataset: {kernel: k.kernel}})})),
      h('p', {class: 'downloads', id: 'profile-range-table'}, `This range's table (every kernel, nanoseconds): `,
        ['md', 'csv', 'json'].map((f, i) => [i ? ' · ' : '', h('a', {href: `/v1/jobs/${jobId}/table?${new URLSearchParams({run: run.index, range: rangeSel.value, format: f})}`,
          dataset: {format: f}}, f.toUpperCase())])));
  };
  rangeSel.addEventListener('change', draw);
  filter.addEventListener('input', draw);
  draw();
  return h('section', null, h('h3', null, 'Kernel summary per NVTX range'),
    h('p', {class: 'muted'}, 'The columns of nsys nvtx_kern_sum: a kernel counts in every range open when it was launched; click a header to sort.'),
    h('div', {class: 'controls'},
      h('div', {class: 'field inline'}, h('label', {for: 'profile-range'}, 'Range'), rangeSel),
      h('div', {class: 'field inline'}, h('label', {for: 'profile-filter'}, 'Kernel'), filter)),
    box);
}

// "+1.2 %" (signed; the overhead can be negative: noise).
const signedPct = (x) => (typeof x === 'number' ? `${x >= 0 ? '+' : ''}${fmt.pct(x)}` : '—');

// How the traced and untraced steps ran.
function execution(r) {
  if (r.graphs === undefined) return null; // runs stored before graphs existed
  const oib = r.optimizer_in_backward ? ' · optimizer in backward (its updates in "optimizer in backward" ranges)' : '';
  return r.graphs ? `CUDA-graph replays (${r.graphs_scope})${oib}`
    : ['eager launches', r.graphs_note ? h('span', {class: 'muted'}, ` — ${r.graphs_note}`) : null, oib || null];
}

// Per phase: CUDA-event time untraced vs traced (the overhead per phase), the
// same by gpu_gated (graph replays held behind a blocking kernel: the GPU's
// execution without the host's launch work; null when eager), each as
// "mean ± std" over the steps where the run has the spread (`<key>_std`; runs
// stored before it: the mean alone), and how much of the traced phase the
// kernels fill.
function phaseTable(r) {
  const rows = r.phases || [];
  if (!rows.length) return null;
  const num = (v, f) => h('td', {class: 'num', dataset: typeof v === 'number' ? {value: v} : undefined}, f(v));
  // A mean and its std with the column's decimals (f, from the means): data-value the mean, data-std the std.
  const numPm = (v, sd, f) => (typeof v === 'number' && typeof sd === 'number'
    ? h('td', {class: 'num', dataset: {value: v, std: sd}}, `${f(v)} ± ${f(sd)}`) : num(v, f));
  const over = (p) => (p.event_ns_unprofiled && p.event_ns_profiled ? 100 * (p.event_ns_profiled - p.event_ns_unprofiled) / p.event_ns_unprofiled : null);
  const gated = rows.some((p) => typeof p.gated_ns_unprofiled === 'number');
  const gatedOver = (p) => (p.gated_ns_unprofiled && p.gated_ns_profiled ? 100 * (p.gated_ns_profiled - p.gated_ns_unprofiled) / p.gated_ns_unprofiled : null);
  // Each ms column with one number of decimals (0.900 beside 13.400).
  const msCol = (key) => { const f = fmt.column(rows.map((p) => (typeof p[key] === 'number' ? p[key] / 1e6 : null)), fmt.msDigits); return (ns) => f(typeof ns === 'number' ? ns / 1e6 : null); };
  const [unF, trF, gunF, gtrF, kerF, busyF, spanF, hostF] = ['event_ns_unprofiled', 'event_ns_profiled', 'gated_ns_unprofiled', 'gated_ns_profiled',
    'kernel_ns', 'kernel_busy_ns', 'gpu_span_ns', 'range_wall_ns'].map(msCol);
  return h('section', null, h('h3', null, 'Tracing overhead per phase'),
    h('p', {class: 'muted'}, "CUDA events around each phase on the model's stream, mean ± std per step: the same steps untraced (before anything was traced) and traced. ",
      'Kernels, GPU span and host time are from the trace (host: the CPU range, or for a phase replayed as a CUDA graph the graph launch call). ',
      'Kernels busy: the time at least one kernel ran; below the summed time when kernels of two streams overlap (the eager backward\'s weight-gradient GEMMs).'),
    h('p', {class: 'muted', id: 'profile-gated-note'}, gated
      ? "Gated (gpu_gated): the same events around each phase's graph replay, enqueued behind a blocking kernel until the host had launched it — the GPU's execution of the phase, CUPTI's GPU-side cost included, without the host's launch work."
      : (r.gpu_gated_note || 'Gated: not measured (runs stored before gpu_gated existed).')),
    h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'profile-phases'},
      h('caption', {class: 'sr-only'}, 'Tracing overhead per phase'),
      h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Phase'),
        ['Instances', 'Untraced (ms)', 'Traced (ms)', 'Overhead', 'Gated untraced (ms)', 'Gated traced (ms)', 'Overhead gated',
          'Kernels summed (ms)', 'Kernels busy (ms)', 'GPU span (ms)', 'Busy % of traced', 'Host (ms)']
          .map((c) => h('th', {scope: 'col', class: 'num'}, c)))),
      h('tbody', null, rows.map((p) => h('tr', {dataset: {phase: p.phase}}, h('th', {scope: 'row'}, p.phase),
        num(p.instances, fmt.int), numPm(p.event_ns_unprofiled, p.event_ns_unprofiled_std, unF),
        numPm(p.event_ns_profiled, p.event_ns_profiled_std, trF), num(over(p), signedPct),
        numPm(p.gated_ns_unprofiled, p.gated_ns_unprofiled_std, gunF), numPm(p.gated_ns_profiled, p.gated_ns_profiled_std, gtrF),
        num(gatedOver(p), signedPct),
        num(p.kernel_ns, kerF), num(p.kernel_busy_ns, busyF), num(p.gpu_span_ns, spanF), num(p.kernel_pct_of_event, fmt.pct),
        num(p.range_wall_ns, hostF)))))));
}

// Each phase's GPU span split by what ran at each instant (runs stored from migration 0030 on): a GEMM,
// other kernels only (the non-GEMM time no GEMM hides), nothing (launch gaps, waits, memcpys and memsets).
function gpuSplitTable(r) {
  const rows = (r.phases || []).filter((p) => typeof p.gemm_busy_ns === 'number' && p.gpu_span_ns > 0);
  if (!rows.length) return null;
  const msF = fmt.column(rows.flatMap((p) => [p.gpu_span_ns, p.gemm_busy_ns, p.other_only_ns, p.gpu_idle_ns].map((v) => v / 1e6)), fmt.msDigits);
  const cell = (v, span) => [h('td', {class: 'num', dataset: {value: v}}, msF(v / 1e6)),
    h('td', {class: 'num', dataset: {value: 100 * v / span}}, fmt.pct(100 * v / span))];
  return h('section', null, h('h3', null, 'What the GPU ran per phase'),
    h('p', {class: 'muted'}, "Each phase's GPU span (its first kernel's start to its last kernel's end, per instance) split by what ran at each instant: ",
      "at least one GEMM; kernels but no GEMM (the other kernels' time that no GEMM hides); no kernel at all (launch gaps, waits between streams, memcpys and memsets). The three add up to the span."),
    h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'profile-gpu-split'},
      h('caption', {class: 'sr-only'}, 'What the GPU ran per phase'),
      h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'Phase'),
        ['GPU span (ms)', 'GEMM running (ms)', 'GEMM %', 'Other kernels only (ms)', 'Other only %', 'Idle (ms)', 'Idle %']
          .map((c) => h('th', {scope: 'col', class: 'num'}, c)))),
      h('tbody', null, rows.map((p) => h('tr', {dataset: {phase: p.phase}}, h('th', {scope: 'row'}, p.phase),
        h('td', {class: 'num', dataset: {value: p.gpu_span_ns}}, msF(p.gpu_span_ns / 1e6)),
        cell(p.gemm_busy_ns, p.gpu_span_ns), cell(p.other_only_ns, p.gpu_span_ns), cell(p.gpu_idle_ns, p.gpu_span_ns)))))));
}

function profileRunView(job, r) {
  const facts = [
    ['Execution', execution(r)],
    // mean ± std over the steps (the std with the mean's decimals; runs stored before the std: the mean alone)
    ['Step, untraced', h('span', {id: 'profile-step-untraced'}, `${fmt.msPm(r.step_ms_unprofiled, r.step_ms_unprofiled_std)} ms`)],
    ['Step, traced', h('span', {id: 'profile-step-traced'}, `${fmt.msPm(r.step_ms_profiled, r.step_ms_profiled_std)} ms`)],
    ['Tracing overhead', typeof r.overhead_gpu_pct === 'number'
      ? `${signedPct(r.overhead_pct)} wall clock · ${signedPct(r.overhead_gpu_pct)} by CUDA events` : signedPct(r.overhead_pct)],
    ['Tracing overhead, gpu_gated', typeof r.overhead_gpu_gated_pct === 'number'
      ? `${signedPct(r.overhead_gpu_gated_pct)} (${fmt.ms(r.step_gpu_gated_ms_unprofiled)} → ${fmt.ms(r.step_gpu_gated_ms_profiled)} ms per step, graph replays held behind a blocking kernel: GPU execution without the host's launch work)`
      : (r.gpu_gated_note || null)],
    // kernel_count and kernel_time_ns cover every traced step (the steps above are per step)
    ['Kernels', h('span', {id: 'profile-kernel-total'}, `${fmt.int(r.kernel_count)} launches, ${ms(r.kernel_time_ns)} ms` +
      (r.profile_steps > 1 ? ` over the ${r.profile_steps} traced steps` : ''))],
    ['Memcpy/memset', `${fmt.int(r.memcpy_memset_count)}, ${ms(r.memcpy_memset_ns)} ms`],
    // forward_wall_ns is the CPU's NVTX range (push to pop: the launches, not waiting for them), shorter than the
    // forward on the GPU when the host runs ahead; the time a synchronised timer (the seeds' timeit) reads is the phase table's
    ['Forward (per instance)', r.forward_wall_ns ? h('span', {id: 'profile-forward-times'}, `on the GPU ${ms(r.forward_gpu_span_ns)} ms (first kernel start to last kernel end) · ` +
      `kernels ${ms(r.forward_kernel_ns)} ms · CPU range ${ms(r.forward_wall_ns)} ms (push to pop: launching, not waiting for the GPU)`) : null],
    ['NVTX ranges', fmt.int(r.range_count)],
    ['Outside every range', r.unattributed_kernels ? `${fmt.int(r.unattributed_kernels)} kernels` : null],
    ['Replayed ops without their graph node', r.graph_ops_unmapped ? h('span', {class: 'error'}, fmt.int(r.graph_ops_unmapped)) : null],
    ['Dropped records', r.dropped_records ? h('span', {class: 'error'}, fmt.int(r.dropped_records)) : null],
  ].filter(([, v]) => v !== null && v !== undefined);
  return [
    h('dl', {class: 'facts', id: 'profile-facts'}, facts.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
    h('p', {class: 'downloads'}, h('a', {id: 'profile-trace', href: `/v1/jobs/${job.id}/trace?run=${r.index}`, download: `job-${job.id}-run-${r.index}-trace.json`},
      'Chrome trace (JSON)'), h('span', {class: 'muted'}, ' — opens in Perfetto (ui.perfetto.dev) or chrome://tracing')),
    phaseTable(r),
    gpuSplitTable(r),
    h('section', null, h('h3', null, 'Answers'), answersList(r)),
    kernelSection(job.id, r),
    h('section', null, h('h3', null, 'Roofline per op'), rooflineTable(r),
      r.roofline_notes ? h('p', {class: 'muted'}, r.roofline_notes) : null),
  ];
}

export function profileView(job) {
  const runs = job.runs || [];
  const ok = runs.filter((r) => r.status === 'succeeded' && r.kernel_summary);
  const failed = runs.filter((r) => r.status !== 'succeeded');
  const runSel = h('select', {id: 'profile-run'}, ok.map((r) => h('option', {value: r.index},
    `run ${r.index}: ${modelName(r)}, context ${r.context_length}, batch ${r.batch_size}, ${r.precision}, ${r.mode}`)));
  const box = h('div', {id: 'profile-run-view'});
  const drawRun = () => {
    const r = ok.find((x) => String(x.index) === runSel.value);
    mount(box, r ? profileRunView(job, r) : null);
  };
  runSel.addEventListener('change', drawRun);
  drawRun();
  return [
    failed.length ? h('ul', {class: 'error', id: 'profile-failed'}, failed.map((r) => h('li', null,
      `run ${r.index} (${modelName(r)}, context ${r.context_length}, ${r.precision}, ${r.mode}): ${r.error || r.status}`))) : null,
    ok.length ? h('section', null, h('h2', null, 'Profile'),
      h('div', {class: 'field inline'}, h('label', {for: 'profile-run'}, 'Run'), runSel), box) : null,
  ];
}
