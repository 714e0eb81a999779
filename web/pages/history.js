// History of one benchmark configuration (same shape, context, batch,
// precision, mode, attention, warm-up steps, graphs, optimizer in backward)
// across jobs over time, so regressions show.
import {h, mount} from '../dom.js';
import {api} from '../api.js';
import * as fmt from '../format.js';
import {configKey, modelName, CONFIG_FIELDS} from '../kinds.js';
import {statCell, phasesPresent, phaseDigits} from '../benchmark.js';
import {lineChart} from '../chart.js';
import {replaceParams, link} from '../route.js';

const MAX_JOBS = 500;

export async function render(main, ctx) {
  let config = ctx.params.get('config') || '';
  const listed = await api.list({kind: 'benchmark', status: 'succeeded', limit: MAX_JOBS}).catch(() => ({jobs: []}));
  const jobs = await api.jobs(listed.jobs.map((j) => j.id));
  if (!ctx.isCurrent()) return;
  const byConfig = new Map();
  for (const job of jobs)
    for (const r of job.runs || []) {
      if (r.status !== 'succeeded' || !r.stats) continue;
      const k = configKey(r);
      if (!byConfig.has(k)) byConfig.set(k, []);
      byConfig.get(k).push({...r, job_id: job.id, at: job.finished_at || job.created_at});
    }
  const describe = (r) => `${modelName(r)} · ctx ${r.context_length} · batch ${r.batch_size} · ${r.precision} · ${r.mode} · ${r.attention} · warm-up ${r.warmup_steps}` +
    (r.graphs ? ' · CUDA graphs' : '') + (r.optimizer_in_backward ? ' · optimizer in backward' : '');
  if (!config && byConfig.size) config = [...byConfig].sort((a, b) => b[1].length - a[1].length)[0][0];
  const sel = h('select', {id: 'config', onchange: (e) => { config = e.target.value; replaceParams(new URLSearchParams({config})); draw(); }},
    [...byConfig].map(([k, rs]) => h('option', {value: k, selected: k === config}, `${describe(rs[0])} (${rs.length} run${rs.length > 1 ? 's' : ''})`)));
  const box = h('div');
  mount(main, h('h1', null, 'History of a configuration'),
    byConfig.size ? h('div', {class: 'field inline'}, h('label', {for: 'config'}, 'Configuration'), sel) : h('p', {class: 'muted'}, 'No succeeded benchmark runs yet.'),
    box);

  function draw() {
    const runs = (byConfig.get(config) || []).sort((a, b) => new Date(a.at) - new Date(b.at));
    if (!runs.length) { mount(box, config ? h('p', {class: 'muted'}, 'No runs of this configuration.') : null); return; }
    const phases = phasesPresent(runs);
    const digits = phaseDigits(runs, phases);
    const rateF = fmt.column(runs.map((r) => r.tokens_per_s), fmt.rateDigits);
    // a configuration of one phase (the forward mode): that phase is the whole step, one line, not two on top of each other
    const parts = phases.filter((p) => p.key !== 'total');
    mount(box,
      lineChart({
        title: `Step time over time: ${describe(runs[0])}`, legendAlways: true,
        series: (parts.length === 1 ? parts : phases).map((p) => ({name: parts.length === 1 ? `${p.long} (the whole step)` : p.long, points: runs.filter((r) => r.stats[p.key]).map((r) => ({
          x: new Date(r.at).getTime(), y: r.stats[p.key].mean_ms, err: r.stats[p.key].std_ms,
          label: `job #${r.job_id} ${fmt.when(r.at)}: ${p.long} ${fmt.msPm(r.stats[p.key].mean_ms, r.stats[p.key].std_ms)} ms`}))})),
        xLabel: 'finished at', yLabel: 'mean time (ms)', xTime: true, yFormat: (v) => fmt.ms(v),
        desc: 'Error bars: ± one standard deviation over the measured steps.',
      }),
      h('div', {class: 'scroll'}, h('table', {class: 'results', id: 'history-table'},
        h('caption', {class: 'sr-only'}, `Every run of ${describe(runs[0])}, newest first`),
        h('thead', null, h('tr', null, h('th', {scope: 'col', class: 'num'}, 'Run'), h('th', {scope: 'col'}, 'Finished'),
          phases.map((p) => h('th', {scope: 'col', class: 'num'}, `${p.label} (ms)`)), h('th', {scope: 'col', class: 'num'}, 'Tokens/s'))),
        h('tbody', null, [...runs].reverse().map((r) => h('tr', null,
          h('td', {class: 'num'}, h('a', {href: `#/jobs/${r.job_id}`}, `#${r.job_id}.${r.index}`)),
          h('td', null, fmt.when(r.at)),
          phases.map((p) => statCell(r.stats[p.key], '', digits[p.key])),
          h('td', {class: 'num'}, rateF(r.tokens_per_s))))))),
      h('p', null, h('a', {href: link('/compare', {runs: runs.map((r) => `${r.job_id}:${r.index}`).join(',')})}, 'Compare these runs')));
  }
  draw();
}
