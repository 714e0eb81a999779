// Web test: the real lmperfd (CPU worker) serving web/, driven in headless
// Debian Chromium through playwright-core. Submits jobs from the form, watches
// them finish in the list, opens job pages, and checks that the compare page's
// table (and its CSV export) carries exactly the API's numbers. Writes
// screenshots next to this test in the build dir. Exit 0 pass, 1 fail.
//
// usage: node test_web.mjs LMPERFD SOURCE_ROOT OUT_DIR
import {spawn, spawnSync} from 'node:child_process';
import {createRequire} from 'node:module';
import {mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync, mkdirSync} from 'node:fs';
import {gunzipSync} from 'node:zlib';
import {tmpdir, availableParallelism} from 'node:os';
import {join, dirname} from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const [lmperfd, sourceRoot = join(HERE, '../..'), outDir = HERE] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const JOB_TIMEOUT_MS = 60000;

// A small custom model: each point runs in well under a second on the CPU.
const SHAPE = {d_model: 64, d_ff: 128, num_layers: 2, num_heads: 4};
const CONTEXTS = [16, 32];

let daemon = null, fixtureDaemon = null, context = null, tmp = null, page = null;
const consoleErrors = [];
const screenshots = [];

function fail(message) {
  const err = new Error(message);
  err.isCheck = true;
  throw err;
}
function check(cond, message) { if (!cond) fail(message); }
function log(...a) { console.log('[web]', ...a); }

function loadPlaywright() {
  const require = createRequire(join(HERE, 'package.json'));
  try {
    return require('playwright-core');
  } catch {
    console.error(`FAIL: playwright-core is not installed in ${join(HERE, 'node_modules')}.\n` +
      `Run:  npm ci --prefix tests/web   (from the source root), then run the web tests again.`);
    process.exit(1);
  }
}

async function startDaemon() {
  tmp = mkdtempSync(join(tmpdir(), 'lmperf-web-'));
  const portFile = join(tmp, 'port');
  daemon = spawn(lmperfd, ['--port', '0', '--port-file', portFile, '--db', join(tmp, 'db'),
    '--web-root', join(sourceRoot, 'web'), '--cpu-only'], {stdio: ['ignore', 'inherit', 'inherit']});
  daemon.on('exit', (code, sig) => { if (daemon) log(`lmperfd exited (${code ?? sig})`); daemon = null; });
  for (let i = 0; i < 200; i++) {
    if (existsSync(portFile) && readFileSync(portFile, 'utf8').trim()) {
      const base = `http://127.0.0.1:${readFileSync(portFile, 'utf8').trim()}`;
      try { if ((await fetch(base + '/healthz')).ok) return base; } catch { /* not yet */ }
    }
    if (!daemon) fail('lmperfd exited during start-up');
    await new Promise((r) => setTimeout(r, 50));
  }
  fail('lmperfd did not start within 10 s');
}

async function apiGet(base, path) {
  const res = await fetch(base + path);
  if (!res.ok) fail(`GET ${path} → ${res.status} ${await res.text()}`);
  return res.json();
}

async function apiPost(base, spec) {
  const res = await fetch(base + '/v1/jobs', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(spec)});
  if (res.status !== 202) fail(`POST /v1/jobs → ${res.status} ${await res.text()}`);
  return res.json();
}

async function waitJob(base, id, {mustSucceed = true} = {}) {
  const t0 = Date.now();
  for (;;) {
    const job = await apiGet(base, `/v1/jobs/${id}`);
    if (['succeeded', 'failed', 'cancelled', 'interrupted'].includes(job.status)) {
      if (mustSucceed) check(job.status === 'succeeded', `job ${id} ended ${job.status}: ${job.error}`);
      return job;
    }
    if (Date.now() - t0 > JOB_TIMEOUT_MS) fail(`job ${id} still ${job.status} after ${JOB_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function shot(name, opts = {}) {
  const path = join(outDir, name);
  await page.screenshot({path, fullPage: true, ...opts});
  screenshots.push(path);
}

// The submit form's defaults must be the JSON Schemas' defaults.
async function checkFormDefaults() {
  const {KINDS} = await import(pathToFileURL(join(sourceRoot, 'web/kinds.js')).href);
  const common = JSON.parse(readFileSync(join(sourceRoot, 'schema/jobs/common.json'), 'utf8'));
  for (const [kind, def] of Object.entries(KINDS)) {
    const file = join(sourceRoot, `schema/jobs/${kind}.json`);
    if (!existsSync(file)) continue;
    const props = {...common.properties, ...JSON.parse(readFileSync(file, 'utf8')).properties};
    for (const f of def.fields) {
      check(f.name in props, `web/kinds.js: ${kind} field '${f.name}' is not in schema/jobs/${kind}.json`);
      if ('default' in props[f.name])
        check(JSON.stringify(props[f.name].default) === JSON.stringify(f.default),
          `web/kinds.js: ${kind}.${f.name} default ${JSON.stringify(f.default)} != schema's ${JSON.stringify(props[f.name].default)}`);
    }
  }
  log('form defaults match schema/jobs/*.json');
}

// Parses "1,234.56" → 1234.56.
const num = (text) => Number(String(text).replace(/[,×\s]/g, ''));

// Each column of a table of texts prints its numbers with one number of
// decimals: no 8.3462 beside 127.234, 1681.94 and 3425; no 0.100 beside 0.1000
// (with `together`, across all those columns).
function checkDecimals(rows, cols, what, together = false) {
  const decimals = (t) => { const m = String(t).trim().match(/^-?[\d,]+(?:\.(\d+))?$/); return m ? (m[1] || '').length : null; };
  const seen = cols.map((k) => new Set(rows.map((r) => decimals(r[k])).filter((d) => d !== null)));
  if (together) check(new Set(seen.flatMap((s) => [...s])).size <= 1, `${what}: columns ${cols} mix decimals ${JSON.stringify(seen.map((s) => [...s]))}`);
  seen.forEach((s, i) => check(s.size <= 1, `${what}: column ${cols[i]} mixes ${[...s].join(', ')} decimals: ${rows.map((r) => r[cols[i]]).join(' ')}`));
}

// A displayed number must equal the API's value rounded to the shown decimals.
function checkShown(text, value, what) {
  const m = String(text).trim().match(/^-?[\d,]+(?:\.(\d+))?/);
  check(m, `${what}: '${text}' is not a number`);
  const decimals = m[1] ? m[1].length : 0;
  const shown = num(m[0]);
  check(Math.abs(shown - value) <= 0.5 * 10 ** -decimals + 1e-9 * Math.abs(value),
    `${what}: page shows ${text}, API says ${value}`);
}

// Every number column of a table on the page has one number of decimals (a
// "mean ± std" cell counts both numbers; "—", words, units and percentages are
// not numbers here; a row with a cell spanning columns, a failed point, is left out).
async function checkTableDecimals(selector, what) {
  const rows = await page.$$eval(`${selector} tbody tr`, (trs) => trs.filter((tr) => ![...tr.cells].some((td) => td.colSpan > 1))
    .map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
  const decimals = (t) => { const m = t.match(/^-?[\d,]+(?:\.(\d+))?$/); return m ? (m[1] || '').length : null; };
  const cols = Math.max(0, ...rows.map((r) => r.length));
  for (let k = 0; k < cols; k++) {
    const seen = new Set(rows.flatMap((r) => String(r[k] ?? '').split(' ± ').map(decimals)).filter((d) => d !== null));
    check(seen.size <= 1, `${what}: column ${k + 1} mixes ${[...seen].join(', ')} decimals: ${rows.map((r) => r[k]).join(' | ')}`);
  }
  check(rows.length, `${what}: no rows`);
}

// The table's "Copy as Markdown" (labelled `label`) puts the table endpoint's md
// (query: its selectors) on the clipboard, and its "Download CSV" the csv.
async function checkTableExports(base, id, query, what) {
  const url = (format) => `${base}/v1/jobs/${id}/table?${new URLSearchParams({...query, format})}`;
  const want = {md: await (await fetch(url('md'))).text(), csv: await (await fetch(url('csv'))).text()};
  await page.evaluate(() => navigator.clipboard.writeText(''));
  await page.click(`button[aria-label="Copy the ${what} as Markdown"]`);
  // polled from here: waitForFunction returns once an async predicate's promise settles, false or not, so the
  // clipboard was read before the button's fetch of the md had come back (an empty copy, now and then)
  let copied = '';
  for (let t0 = Date.now(); !copied && Date.now() - t0 < 10000; await new Promise((r) => setTimeout(r, 50)))
    copied = await page.evaluate(() => navigator.clipboard.readText());
  check(copied === want.md && /^\|.*\|\n\|[-:|]+\|\n/.test(copied), `job ${id}: "Copy the ${what} as Markdown" copied:\n${copied}\nthe API's md:\n${want.md}`);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click(`a[aria-label="Download the ${what} as CSV"]`)]);
  const csv = readFileSync(await dl.path(), 'utf8');
  check(csv === want.csv && dl.suggestedFilename().endsWith('.csv'), `job ${id}: "Download the ${what} as CSV" saved ${dl.suggestedFilename()}:\n${csv}\nthe API's csv:\n${want.csv}`);
}

// A CSV's rows of fields (a quoted field may hold commas, quotes and newlines).
function parseCsv(text) {
  const rows = [];
  let row = [], field = '', quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; }
    else if (c === '\n') { row.push(field); rows.push(row); row = []; field = ''; }
    else field += c;
  }
  if (field || row.length) rows.push([...row, field]);
  return rows;
}

// The compare page's memory table exports (Export CSV, Export Markdown under its heading):
// its header and one row per run, each cell the text the page shows (without the
// "first" tag and the Remove column).
async function checkMemoryExports(what) {
  const shown = await page.$eval('#compare-memory', (t) => {
    const text = (c) => { const x = c.cloneNode(true); x.querySelectorAll('.tag, .sr-only').forEach((e) => e.remove()); return x.textContent; };
    const keep = [...t.tHead.rows[0].cells].map((c) => text(c) !== '');
    const cells = (tr) => [...tr.cells].filter((_, i) => keep[i]).map(text);
    return [cells(t.tHead.rows[0]), ...[...t.tBodies[0].rows].map(cells)];
  });
  const exported = async (format) => {
    const button = await page.$(`#compare-memory-box button[aria-label="Export the memory runs as ${format}"]`);
    check(button, `${what}: no Export ${format} for the memory runs`);
    if (!button) return '';
    const [dl] = await Promise.all([page.waitForEvent('download'), button.click()]);
    return readFileSync(await dl.path(), 'utf8');
  };
  const csv = parseCsv(await exported('CSV'));
  check(JSON.stringify(csv) === JSON.stringify(shown), `${what}: the memory CSV export\n${JSON.stringify(csv)}\nis not the table shown\n${JSON.stringify(shown)}`);
  const mdText = await exported('Markdown');
  const lines = mdText.split('\n').filter((l) => l.startsWith('|'));
  const md = lines.filter((_, i) => i !== 1).map((l) => l.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|')));
  check(/^\|[-:|]+\|$/.test(lines[1] || '') && JSON.stringify(md) === JSON.stringify(shown),
    `${what}: the memory Markdown export\n${mdText}\nis not the table shown\n${JSON.stringify(shown)}`);
  return shown.length - 1;
}

async function submitNumerics(base) {
  await page.goto(base + '/#/submit?kind=numerics');
  await page.waitForSelector('#f-count');
  await page.fill('#f-label', 'web test numerics');
  await page.fill('#f-count', '2000');
  const curl = await page.textContent('#curl');
  check(curl.includes('/v1/jobs') && curl.includes('"count":2000'), `curl command does not show the spec: ${curl}`);
  await page.click('button[type=submit]');
  await page.waitForURL(/#\/jobs\?highlight=\d+/);
  const id = Number(new URL(page.url()).hash.match(/highlight=(\d+)/)[1]);
  await page.waitForSelector(`tr[data-id="${id}"][data-status="succeeded"]`, {timeout: JOB_TIMEOUT_MS});
  const job = await apiGet(base, `/v1/jobs/${id}`);
  check(job.spec.count === 2000 && job.label === 'web test numerics', `submitted spec differs: ${JSON.stringify(job.spec)}`);
  log(`numerics job ${id} submitted from the form and seen succeeded in the list`);

  await page.click(`tr[data-id="${id}"] a[href="#/jobs/${id}"]`);
  await page.waitForSelector('#numerics-table tbody tr');
  const cells = await page.$$eval('#numerics-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => ({text: td.textContent, value: td.dataset.value}))));
  const rows = job.runs[0].rows;
  check(cells.length === rows.length, `numerics table has ${cells.length} rows, API ${rows.length}`);
  rows.forEach((r, i) => {
    check(cells[i][0].text === r.accumulator && Number(cells[i][3].value) === r.result, `numerics row ${i} differs from the API`);
    // the relative error keeps 3 significant digits: fp32's 1.3e-5 is not "0.0 %"
    const rel = r.error / r.exact * 100, shown = parseFloat(cells[i][6].text);
    check(/ %$/.test(cells[i][6].text) && Math.abs(shown - rel) <= 0.005 * Math.abs(rel), `numerics row ${i}: relative error ${cells[i][6].text}, API ${rel} %`);
  });
  // the results column with one number of decimals (bf16's 4 reads 4.000000 beside 10.000134)
  await checkTableDecimals('#numerics-table', `numerics job ${id}`);
  await checkTableExports(base, id, {experiment: 'accumulation'}, 'accumulation table');
  await shot('job-numerics.png');
  // an accumulator past its range (fp16 above 65504): its row says inf, the others still render
  const overflow = (await apiPost(base, {kind: 'numerics', summand: 1000, count: 100})).id;
  await waitJob(base, overflow);
  await page.goto(`${base}/#/jobs/${overflow}`);
  await page.waitForSelector('#numerics-table tbody tr');
  const results = await page.$$eval('#numerics-table tbody tr', (trs) => trs.map((tr) => tr.cells[3].textContent));
  check(results.length === 7 && results[1] === 'inf', `numerics page with an overflowed accumulator: ${JSON.stringify(results)}`);
  // both experiments: the accumulation table and one precision-report table per precision, rows as the API's
  const both = await waitJob(base, (await apiPost(base, {kind: 'numerics', experiments: ['accumulation', 'precision_report']})).id);
  await page.goto(`${base}/#/jobs/${both.id}`);
  await page.waitForSelector('table.precision-report', {state: 'attached'});
  check(!(await page.isVisible('h1:text("Something went wrong")')), 'a numerics job with the precision report crashed its page');
  const reports = await page.$$eval('table.precision-report', (ts) => ts.map((t) => [t.dataset.precision, t.tBodies[0].rows.length]));
  const want = both.runs.filter((r) => r.experiment === 'precision_report').map((r) => [r.precision, r.rows.length]);
  check(JSON.stringify(reports) === JSON.stringify(want) && want.length === 4 && await page.$('#numerics-table'),
    `precision report tables ${JSON.stringify(reports)}, API ${JSON.stringify(want)}`);
  await checkTableExports(base, both.id, {experiment: 'precision_report'}, 'precision report (every precision)');
  // A browser that refuses the clipboard: the Markdown is shown, selected, to copy by hand.
  await page.evaluate(() => {
    Object.defineProperty(navigator, 'clipboard', {value: {writeText: () => Promise.reject(new Error('denied'))}, configurable: true});
    document.execCommand = () => false;
  });
  await page.click('button[aria-label="Copy the accumulation table as Markdown"]');
  await page.waitForSelector('.copy-fallback textarea');
  const shown = await page.$eval('.copy-fallback textarea', (ta) => [ta.value, document.activeElement === ta, ta.selectionEnd - ta.selectionStart]);
  const md = await (await fetch(`${base}/v1/jobs/${both.id}/table?experiment=accumulation&format=md`)).text();
  check(shown[0] === md && shown[1] && shown[2] === md.length, `clipboard refused: the fallback shows ${JSON.stringify(shown)}, the API's md ${JSON.stringify(md)}`);
  await page.reload();
  await shot('job-numerics-precision-report.png');
  return id;
}

async function submitBenchmark(base) {
  await page.goto(base + '/#/submit?kind=benchmark');
  await page.waitForSelector('#f-model-small');
  await page.uncheck('#f-model-small');
  await page.check('#f-model-custom');
  for (const [k, v] of Object.entries(SHAPE)) await page.fill(`#f-model-${k}`, String(v));
  await page.fill('#f-context_length', CONTEXTS.join(', '));
  await page.fill('#f-batch_size', '2');
  await page.fill('#f-vocab_size', '256');
  await page.check('#f-precision-bf16');
  await page.fill('#f-warmup_steps', '2');
  await page.fill('#f-measure_steps', '3');
  await page.fill('#f-label', 'web test fp32+bf16');
  const spec = JSON.parse(await page.textContent('#spec-json'));
  const want = {kind: 'benchmark', model: SHAPE, context_length: CONTEXTS, batch_size: 2, vocab_size: 256,
    precision: ['fp32', 'bf16'], mode: 'train_step', warmup_steps: 2, measure_steps: 3};
  for (const [k, v] of Object.entries(want))
    check(JSON.stringify(spec[k]) === JSON.stringify(v), `form spec ${k} = ${JSON.stringify(spec[k])}, expected ${JSON.stringify(v)}`);
  await shot('submit-benchmark.png');
  await page.click('button[type=submit]');
  await page.waitForURL(/#\/jobs\?highlight=\d+/);
  const id = Number(new URL(page.url()).hash.match(/highlight=(\d+)/)[1]);
  await page.waitForSelector(`tr[data-id="${id}"]`);
  const first = await page.$eval(`tr[data-id="${id}"]`, (tr) => ({status: tr.dataset.status, bar: !!tr.querySelector('progress')}));
  if (first.status !== 'succeeded') check(first.bar, `job ${id} is ${first.status} but its row shows no progress bar`);
  await page.waitForSelector(`tr[data-id="${id}"][data-status="succeeded"]`, {timeout: JOB_TIMEOUT_MS});
  log(`benchmark job ${id} submitted from the form, first seen ${first.status}, then succeeded in the list without a reload`);
  await shot('jobs.png');
  return id;
}

// Every linear-axis chart on the page holds its data: no line, marker or area
// above the highest tick; tick labels carry no trailing zeros ("25", not "25.00").
async function checkAxesHoldData(what) {
  const charts = await page.$$eval('figure.chart svg.plot', (svgs) => svgs.map((svg) => {
    const ticks = [...svg.querySelectorAll('.grid line:not(.v)')].map((l) => Number(l.getAttribute('y1')));
    const ys = [];
    for (const p of svg.querySelectorAll('path.line, path.area'))
      for (const m of p.getAttribute('d').matchAll(/([MLV])([-\d.]+)(?:,([-\d.]+))?/g)) ys.push(Number(m[1] === 'V' ? m[2] : m[3]));
    for (const c of svg.querySelectorAll('circle.marker')) ys.push(Number(c.getAttribute('cy')));
    const labels = [...svg.querySelectorAll('text.tick')].map((t) => t.textContent);
    return {title: svg.getAttribute('aria-label'), log: /\(log\)/.test(svg.textContent), top: Math.min(...ticks), high: Math.min(...ys), labels};
  }));
  for (const c of charts) {
    if (!c.log && Number.isFinite(c.high)) check(c.high >= c.top - 0.5, `${what}: '${c.title}' draws data at y ${c.high}, above its highest tick at y ${c.top}`);
    const long = c.labels.filter((l) => /\.\d*0(?!\d)/.test(l));
    check(!long.length, `${what}: '${c.title}' tick labels with trailing zeros: ${long.join(', ')}`);
  }
  check(charts.length, `${what}: no chart`);
}

// The column formatters themselves, on magnitudes a small job may or may not
// produce (tokens/s of 19,637 and 67.4; an optimizer step of 6.24 and 0.763 ms;
// 86.6 MiB of parameters beside 0.002 MiB of input): one number of decimals per column.
async function checkColumnFormatters() {
  const cols = await page.evaluate(async () => {
    const fmt = await import('/format.js');
    const {statCell, phaseDigits} = await import('/benchmark.js');
    const column = (vs, digitsOf) => { const f = fmt.column(vs, digitsOf); return vs.map(f); };
    const runs = [6.24, 0.763, 0.0912].map((m) => ({stats: {optimizer: {mean_ms: m, std_ms: m / 7}}}));
    const digits = phaseDigits(runs);
    return {
      tokens: column([19637.2, 67.41, 3512.9], fmt.rateDigits),
      tflops: column([0.00221, 0.000801, 45.5], fmt.sigDigits),
      us: column([8047.4, 6.72, 212.2], fmt.usDigits),
      mib: [86.58, 0.002, 10.27].map((v) => v * 1048576).map(fmt.mibColumn([86.58, 0.002, 10.27].map((v) => v * 1048576))),
      opt: runs.map((r) => statCell(r.stats.optimizer, '', digits.optimizer).textContent.split(' ± ')).flat(),
    };
  });
  for (const [what, texts] of Object.entries(cols)) {
    const decimals = new Set(texts.map((t) => (t.split('.')[1] || '').length));
    check(decimals.size === 1, `the ${what} column formatter mixes decimals: ${texts.join(' | ')}`);
  }
}

// The model's shape on the job page's summary, as in the seeds' tables: d_model,
// d_ff, Layers and Heads right after Model (named as the table endpoint names
// them, in its order), each row's the API run's.
const SHAPE_COLUMNS = [['d_model', 'd_model'], ['d_ff', 'd_ff'], ['Layers', 'num_layers'], ['Heads', 'num_heads']];
async function checkShapeColumns(id, job, table, heads) {
  const labels = SHAPE_COLUMNS.map(([label]) => label);
  const at = heads.indexOf('Model');
  check(at >= 0 && JSON.stringify(heads.slice(at + 1, at + 5)) === JSON.stringify(labels),
    `benchmark job ${id}: the summary's columns after Model are not ${labels.join(' | ')}: ${heads.join(' | ')}`);
  const apiAt = table.columns.indexOf('Model');
  check(JSON.stringify(table.columns.slice(apiAt + 1, apiAt + 5)) === JSON.stringify(labels),
    `benchmark job ${id}: the table endpoint's columns after Model are ${table.columns.join(' | ')}, the page's ${labels.join(' | ')}`);
  const rows = await page.$$eval('#bench-summary tbody tr', (trs, keys) => trs.map((tr) => ({run: Number(tr.dataset.run),
    cells: keys.map((k) => { const td = tr.querySelector(`td[data-key="${k}"]`); return td ? td.textContent : null; }),
    after: tr.querySelector('td[data-key="model"]')?.nextElementSibling?.dataset.key})), SHAPE_COLUMNS.map(([, key]) => key));
  for (const row of rows) {
    const r = job.runs.find((x) => x.index === row.run);
    const want = SHAPE_COLUMNS.map(([, key]) => String(r[key]));
    check(JSON.stringify(row.cells) === JSON.stringify(want) && row.after === 'd_model' && want.every((v) => /^\d+$/.test(v)),
      `benchmark job ${id} run ${row.run}: the shape cells ${JSON.stringify(row.cells)}, the API run's ${JSON.stringify(want)}`);
  }
}

async function checkBenchmarkPage(base, id) {
  const job = await apiGet(base, `/v1/jobs/${id}`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#bench-summary tbody tr');
  const n = await page.$$eval('#bench-summary tbody tr', (trs) => trs.length);
  check(n === job.runs.length, `benchmark summary has ${n} rows, API ${job.runs.length} runs`);
  const run = job.runs.find((r) => String(r.index) === (page.url(), '0'));
  const warm = run.steps.filter((s) => s.warmup).length;
  const series = run.steps.some((s) => s.optimizer_ms !== null) ? 4 : 2;
  const flags = await page.$$eval('figure.chart svg rect.marker.flag', (r) => r.length);
  check(flags >= warm * 2 && flags <= warm * series, `per-step chart shows ${flags} warm-up markers, expected ${warm} per series`);
  // fp32 + bf16 (seed 002's speedup analysis): the page's "Speedup vs fp32 (×)" is the table endpoint's, row by
  // row (its rows in run order), and the speedup chart is drawn
  const table = await apiGet(base, `/v1/jobs/${id}/table?format=json`);
  const col = table.columns.indexOf('Speedup vs fp32 (×)');
  check(col >= 0, `benchmark job ${id}: the API table has no speedup column: ${table.columns.join(' | ')}`);
  const heads = await page.$$eval('#bench-summary thead th', (ths) => ths.map((th) => th.textContent));
  await checkShapeColumns(id, job, table, heads);
  check(heads.includes('Speedup vs fp32 (×)') && heads.indexOf('Speedup vs fp32 (×)') === heads.indexOf('Total (ms)') + 1,
    `benchmark job ${id}: the page's table has no "Speedup vs fp32 (×)" after Total: ${heads.join(' | ')}`);
  const speedups = await page.$$eval('#bench-summary tbody tr', (trs) => trs.map((tr) => {
    const td = tr.querySelector('td[data-key="speedup_vs_fp32"]');
    return {run: Number(tr.dataset.run), value: td.dataset.value, text: td.textContent};
  }));
  for (const s of speedups) {
    const want = table.rows[job.runs.findIndex((r) => r.index === s.run)][col];
    check(typeof want === 'number' && Math.abs(Number(s.value) - want) <= 1e-9 * want && s.text === want.toFixed(2),
      `benchmark job ${id} run ${s.run}: the page's speedup ${s.value} (${s.text}), the API table's ${want}`);
  }
  check(await page.$('figure.chart svg[aria-label^="Speedup over fp32"]'), `benchmark job ${id}: no speedup chart on the job page`);
  // seed 002's tables by precision: the endpoint's ?pivot=precision as the page draws it, cell by cell, and its exports
  const pivot = await apiGet(base, `/v1/jobs/${id}/table?pivot=precision&format=json`);
  await page.waitForSelector('#bench-by-precision tbody tr');
  const pivotHeads = await page.$$eval('#bench-by-precision thead th', (ths) => ths.map((th) => th.textContent));
  check(JSON.stringify(pivotHeads) === JSON.stringify(pivot.columns) && pivot.columns.includes('BF16 Speedup vs FP32 (×)'),
    `benchmark job ${id}: the page's table by precision has ${pivotHeads.join(' | ')}, the API's ${pivot.columns.join(' | ')}`);
  const pivotCells = await page.$$eval('#bench-by-precision tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const pivotWant = pivot.rows.map((row) => row.map((v, k) => v === null ? '—' : typeof v === 'number' && Number.isInteger(pivot.decimals[k]) ? v.toFixed(pivot.decimals[k]) : String(v)));
  check(JSON.stringify(pivotCells) === JSON.stringify(pivotWant),
    `benchmark job ${id}: the page's table by precision ${JSON.stringify(pivotCells)}, the API's ${JSON.stringify(pivotWant)}`);
  await checkAxesHoldData(`benchmark job ${id}`);
  await checkTableDecimals('#bench-summary', `benchmark job ${id}: summary`);
  await checkTableExports(base, id, {}, 'summary table');
  await checkTableExports(base, id, {pivot: 'precision'}, 'table by precision');
  await shot('job-benchmark.png');
  await checkPageFits(`benchmark job ${id}`);
}

// A sweep of two precisions × two modes: four series in "time vs context length", whose data
// table (a column per series) is wider than an 800 px window.
async function checkWideChartTable(base) {
  const id = (await apiPost(base, {kind: 'benchmark', label: 'web test four series', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS, batch_size: 2, warmup_steps: 1, measure_steps: 1, precision: ['fp32', 'bf16'], mode: ['forward', 'train_step']})).id;
  await waitJob(base, id);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('figure.chart details.chart-data');
  await checkPageFits(`benchmark job ${id} (four series)`);
}

// The page, every <details> open (a chart's "Data as a table", ...), does not scroll sideways at
// 1280 or 800 px: a wide table scrolls inside its own box (the time vs context length chart's data
// table, one column per series, was in no scroll box: four series pushed the page 509 px past 1280).
// Leaves 1280 × 900 and the <details> as they were.
async function checkPageFits(what) {
  const closed = await page.$$eval('details:not([open])', (ds) => ds.map((d) => { d.dataset.openedByTest = ''; d.open = true; }).length);
  try {
    for (const width of [1280, 800]) {
      await page.setViewportSize({width, height: 900});
      const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      check(over <= 0, `${what}: at ${width} px with its details open the page scrolls sideways by ${over} px`);
    }
  } finally {
    await page.setViewportSize({width: 1280, height: 900}); /* the context's size, which later checks assume */
    await page.$$eval('details[data-opened-by-test]', (ds) => ds.forEach((d) => { d.open = false; delete d.dataset.openedByTest; }));
  }
  log(`${what}: fits at 1280 and 800 px with its ${closed} closed details opened`);
}

// A run whose measured steps ran beside one busy-looping process per CPU (as
// tests/api/test_host_load.py makes one): the API flags it (warnings, the
// table's "Host Busy (%)" column); the job page says which run and what the
// warning says, above the summary, and its table has the column exactly when the
// API table has it (here, and for another job), with the API's share; the
// compare page has it when a compared run was disturbed.
const HOST_BUSY = 'Host Busy (%)';
const HOGGED = {kind: 'benchmark', label: 'web test host busy', model: {name: 'hog', d_model: 128, d_ff: 512, num_layers: 2, num_heads: 4},
  vocab_size: 1000, context_length: 256, batch_size: 8, mode: 'train_step', warmup_steps: 1, measure_steps: 4};
async function checkHostBusy(base, otherJob) {
  const hogs = Array.from({length: availableParallelism()}, () => spawn(process.execPath, ['-e', 'for (;;) {}'], {stdio: 'ignore'}));
  let job;
  try {
    job = await waitJob(base, (await apiPost(base, HOGGED)).id);
  } finally {
    for (const p of hogs) p.kill('SIGKILL');
  }
  const run = job.runs[0];
  check(run.warnings.length > 0 && typeof run.host_other_cpu_pct === 'number',
    `a run beside ${hogs.length} busy processes has no warning: ${JSON.stringify(run.warnings)}, ${run.host_other_cpu_pct} % (${run.host_other_cpu_note})`);
  for (const id of [job.id, otherJob]) {
    const api = await apiGet(base, `/v1/jobs/${id}`);
    const table = await apiGet(base, `/v1/jobs/${id}/table?format=json`);
    const col = table.columns.indexOf(HOST_BUSY);
    await page.goto(`${base}/#/jobs/${id}`);
    await page.waitForSelector('#bench-summary tbody tr');
    const heads = await page.$$eval('#bench-summary thead th', (ths) => ths.map((th) => th.textContent));
    check(heads.includes(HOST_BUSY) === col >= 0, `job ${id}: the page's summary ${heads.includes(HOST_BUSY) ? 'has' : 'lacks'} "${HOST_BUSY}", the API table ${col >= 0 ? 'has' : 'lacks'} it`);
    const warned = api.runs.filter((r) => r.warnings && r.warnings.length);
    const items = await page.$$eval('#bench-warnings li', (lis) => lis.map((li) => ({run: Number(li.dataset.run), text: li.textContent})));
    check(items.length === warned.reduce((a, r) => a + r.warnings.length, 0) &&
      warned.every((r) => r.warnings.every((w) => items.some((it) => it.run === r.index && it.text.includes(w) && it.text.includes(`Run ${r.index}`)))),
      `job ${id}: the page's warnings ${JSON.stringify(items)} are not the runs' ${JSON.stringify(warned.map((r) => [r.index, r.warnings]))}`);
    if (col < 0) continue;
    const cells = await page.$$eval('#bench-summary tbody tr', (trs) => trs.map((tr) => ({run: Number(tr.dataset.run),
      text: tr.querySelector('td[data-key=host_busy]').textContent})));
    for (const c of cells) {
      const r = api.runs.find((x) => x.index === c.run);
      const apiCell = table.rows[api.runs.indexOf(r)][col];
      check(typeof r.host_other_cpu_pct === 'number' ? c.text === r.host_other_cpu_pct.toFixed(table.decimals[col]) && Math.abs(apiCell - r.host_other_cpu_pct) < 1e-9 : c.text === '—',
        `job ${id} run ${c.run}: Host Busy shows ${c.text}, the run's ${r.host_other_cpu_pct}, the API table's ${apiCell}`);
    }
    const warnBox = await page.$eval('#bench-warnings', (el) => { const b = el.getBoundingClientRect(); return {top: b.top, h: b.height}; });
    const tableTop = await page.$eval('#bench-summary', (t) => t.getBoundingClientRect().top);
    check(warnBox.h > 0 && warnBox.top < tableTop, `job ${id}: the warnings are not shown above the summary table`);
    await shot('job-host-busy.png', {fullPage: false});
    await page.setViewportSize({width: 800, height: 900});
    await shot('job-host-busy-800.png', {fullPage: false});
    await page.setViewportSize({width: 1280, height: 900});
  }
  // Compare: the column when a compared run was disturbed, as the compare endpoint has it.
  const both = await apiGet(base, `/v1/compare?jobs=${job.id},${otherJob}&format=json`);
  await page.goto(`${base}/#/compare?jobs=${job.id},${otherJob}`);
  await page.waitForSelector('#compare-table tbody tr');
  const cmpHeads = await page.$$eval('#compare-table thead th', (ths) => ths.map((th) => th.textContent));
  check(cmpHeads.includes(HOST_BUSY) === both.columns.includes(HOST_BUSY) && cmpHeads.includes(HOST_BUSY),
    `compare: the page ${cmpHeads.includes(HOST_BUSY) ? 'has' : 'lacks'} "${HOST_BUSY}", /v1/compare ${both.columns.includes(HOST_BUSY) ? 'has' : 'lacks'} it`);
  const hogCell = await page.$eval(`#compare-table tr[data-run="${job.id}:${run.index}"] td[data-key=host_busy]`, (td) => td.textContent);
  check(hogCell === run.host_other_cpu_pct.toFixed(0), `compare: the disturbed run's Host Busy reads ${hogCell}, the API ${run.host_other_cpu_pct}`);
  const cmpWarn = await page.$eval('#compare-warnings', (el) => el.textContent).catch(() => '');
  check(cmpWarn.includes(`#${job.id}.${run.index}`) && run.warnings.every((w) => cmpWarn.includes(w)), `compare: the disturbed run's warning is not shown: ${cmpWarn}`);
  await shot('compare-host-busy.png');
  log(`host busy: job ${job.id} (${run.host_other_cpu_pct.toFixed(0)} % busy) shows its warning and "${HOST_BUSY}" as the API's table; job ${otherJob} as its own; compare too`);
}

// The compare page's table reads as the job page's summary and /v1/compare: the model's
// shape (d_model, d_ff, Layers, Heads) right after Model, each cell the API run's.
async function checkCompareShape(base, jobs, rows) {
  const labels = SHAPE_COLUMNS.map(([label]) => label);
  const heads = await page.$$eval('#compare-table thead th', (ths) => ths.map((th) => th.textContent));
  const at = heads.indexOf('Model');
  check(at >= 0 && JSON.stringify(heads.slice(at + 1, at + 5)) === JSON.stringify(labels),
    `compare: the table's columns after Model are not ${labels.join(' | ')}: ${heads.join(' | ')}`);
  const ids = [...jobs.keys()];
  const api = await apiGet(base, `/v1/compare?jobs=${ids.join(',')}&format=json`);
  const apiAt = api.columns.indexOf('Model');
  check(apiAt >= 0 && JSON.stringify(api.columns.slice(apiAt + 1, apiAt + 5)) === JSON.stringify(labels),
    `/v1/compare's columns after Model are ${api.columns.join(' | ')}, the page's ${labels.join(' | ')}`);
  for (const row of rows) {
    const [jid, idx] = row.run.split(':').map(Number);
    const r = jobs.get(jid).runs.find((x) => x.index === idx);
    const got = SHAPE_COLUMNS.map(([, key]) => row.keys[key] && row.keys[key].text);
    const want = SHAPE_COLUMNS.map(([, key]) => String(r[key]));
    check(JSON.stringify(got) === JSON.stringify(want) && want.every((v) => /^\d+$/.test(v)),
      `compare row ${row.run}: the shape cells ${JSON.stringify(got)}, the API run's ${JSON.stringify(want)}`);
  }
  // /v1/compare's rows carry the same shape (Job, Model, then the shape)
  for (const apiRow of api.rows) {
    const shape = apiRow.slice(apiAt + 1, apiAt + 5).map(String);
    const own = jobs.get(apiRow[0]).runs.some((r) => JSON.stringify(SHAPE_COLUMNS.map(([, key]) => String(r[key]))) === JSON.stringify(shape));
    check(own, `/v1/compare row ${JSON.stringify(apiRow.slice(0, 6))}: its shape is no run's of job ${apiRow[0]}`);
  }
}

async function checkCompare(base, formJob, apiJob) {
  const jobs = new Map();
  for (const id of [formJob, apiJob]) jobs.set(id, await apiGet(base, `/v1/jobs/${id}`));
  const refs = [...jobs.values()].flatMap((j) => j.runs.map((r) => `${j.id}:${r.index}`));
  const baseline = `${apiJob}:0`;
  await page.goto(`${base}/#/compare?runs=${refs.join(',')}&baseline=${baseline}`);
  await page.waitForSelector('#compare-table tbody tr');
  const rows = await page.$$eval('#compare-table tbody tr', (trs) => trs.map((tr) => ({
    run: tr.dataset.run,
    keys: Object.fromEntries([...tr.querySelectorAll('td[data-key]')].map((td) => [td.dataset.key, {text: td.textContent, differs: td.classList.contains('differs')}])),
    stats: Object.fromEntries([...tr.querySelectorAll('td[data-mean]')].map((td) => [[...td.classList].find((c) => ['forward', 'backward', 'optimizer', 'total'].includes(c)),
      {mean: td.dataset.mean, std: td.dataset.std, text: td.textContent}])),
    tokens: tr.querySelector('td.tokens').dataset.value,
    tokensText: tr.querySelector('td.tokens').textContent,
    speedup: tr.querySelector('td.speedup').dataset.value,
    speedupText: tr.querySelector('td.speedup').textContent,
  })));
  check(rows.length === refs.length, `compare table has ${rows.length} rows, expected ${refs.length}`);
  for (const row of rows) {
    const [jid, idx] = row.run.split(':').map(Number);
    const r = jobs.get(jid).runs.find((x) => x.index === idx);
    const where = `compare row ${row.run}`;
    check(Number(row.keys.context_length.text) === r.context_length, `${where}: context ${row.keys.context_length.text} != API ${r.context_length}`);
    check(!row.keys.precision || row.keys.precision.text === r.precision, `${where}: precision differs from API`);
    for (const phase of ['forward', 'backward', 'optimizer', 'total']) {
      const api = r.stats[phase];
      if (!api) continue;
      const cell = row.stats[phase];
      check(cell, `${where}: no ${phase} cell`);
      check(Number(cell.mean) === api.mean_ms && Number(cell.std) === api.std_ms, `${where}: ${phase} ${cell.mean} ± ${cell.std} != API ${api.mean_ms} ± ${api.std_ms}`);
      const [m, s] = cell.text.split('±');
      checkShown(m, api.mean_ms, `${where} ${phase} mean`);
      checkShown(s, api.std_ms, `${where} ${phase} std`);
    }
    check(Number(row.tokens) === r.tokens_per_s, `${where}: tokens/s ${row.tokens} != API ${r.tokens_per_s}`);
    checkShown(row.tokensText, r.tokens_per_s, `${where} tokens/s`);
    // the baseline is fp32 in the API job: each row against that job's fp32 run of its context
    const b = jobs.get(apiJob).runs.find((x) => x.context_length === r.context_length);
    const speedup = b.stats.total.mean_ms / r.stats.total.mean_ms;
    check(Math.abs(Number(row.speedup) - speedup) < 1e-9 * speedup, `${where}: speedup ${row.speedup} != ${speedup}`);
    checkShown(row.speedupText, speedup, `${where} speedup`);
  }
  check(rows.every((r) => r.keys.precision && r.keys.precision.differs), 'precision differs between rows but is not highlighted');
  const legend = await page.textContent('#compare-baseline');
  check(legend.includes(`precision fp32 · job #${apiJob}`), `the baseline legend does not name it: '${legend}'`);
  // Baseline "same shape in job N": each row against N's fp32 run of its context length.
  await page.selectOption('#baseline', `job:${apiJob}`);
  const perShape = await page.$$eval('#compare-table tbody tr', (trs) => trs.map((tr) => [tr.dataset.run, tr.querySelector('td.speedup').dataset.value]));
  for (const [refText, value] of perShape) {
    const [jid, idx] = refText.split(':').map(Number);
    const r = jobs.get(jid).runs.find((x) => x.index === idx);
    const b = jobs.get(apiJob).runs.find((x) => x.context_length === r.context_length);
    const want = b.stats.total.mean_ms / r.stats.total.mean_ms;
    check(Math.abs(Number(value) - want) < 1e-9 * want, `per-shape speedup of ${refText} is ${value}, expected ${want}`);
  }
  check(new URL(page.url()).hash.includes(`baseline=job%3A${apiJob}`) || new URL(page.url()).hash.includes(`baseline=job:${apiJob}`),
    `the URL does not keep the baseline: ${page.url()}`);
  const charts = await page.$$eval('figure.chart svg.plot', (s) => s.length);
  check(charts >= 2, `compare page shows ${charts} charts, expected time-vs-context and precision speedup`);
  await checkTableDecimals('#compare-table', 'compare table');
  await checkCompareShape(base, jobs, rows);
  log(`compare table: ${rows.length} rows equal the API's numbers`);

  // The CSV export carries the same numbers, unrounded.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export CSV")')]);
  const csv = readFileSync(await download.path(), 'utf8').trim().split('\n').map((l) => l.split(','));
  const head = csv[0];
  check(csv.length - 1 === refs.length, `CSV has ${csv.length - 1} rows, expected ${refs.length}`);
  for (const line of csv.slice(1)) {
    const r = jobs.get(Number(line[0])).runs.find((x) => x.index === Number(line[1]));
    check(Number(line[head.indexOf('total_mean_ms')]) === r.stats.total.mean_ms, `CSV total mean of ${line[0]}:${line[1]} differs from the API`);
  }
  const [md] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export Markdown")')]);
  const mdText = readFileSync(await md.path(), 'utf8');
  check(/^\|[^\n]*\bModel\s*\|\s*d_model\s*\|\s*d_ff\s*\|\s*Layers\s*\|\s*Heads\s*\|\s*Context Length\s*\|[^\n]*\|\s*Fwd \(ms\)\s*\|/.test(mdText) && mdText.split('\n').filter((l) => l.startsWith('|')).length === refs.length + 2,
    `Markdown export is not the seeds' table (Model, its shape, Context Length, ..., Fwd):\n${mdText}`);
  const mdRows = mdText.split('\n').filter((l) => l.startsWith('|')).slice(2).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
  const mdHead = mdText.split('\n')[0].split('|').slice(1, -1).map((c) => c.trim());
  const mdAt = mdHead.indexOf('Model');
  const shapes = new Set([...jobs.values()].flatMap((j) => j.runs.map((r) => SHAPE_COLUMNS.map(([, key]) => r[key]).join(' '))));
  check(mdRows.every((cells) => shapes.has(cells.slice(mdAt + 1, mdAt + 5).join(' '))),
    `Markdown export's shape cells are not the API runs' (${[...shapes].join('; ')}):\n${mdText}`);
  const csvAt = head.indexOf('model');
  check(JSON.stringify(head.slice(csvAt + 1, csvAt + 5)) === JSON.stringify(SHAPE_COLUMNS.map(([, key]) => key)),
    `CSV export: the columns after model are ${head.join(',')}, not d_model, d_ff, num_layers, num_heads`);
  for (const line of csv.slice(1)) {
    const r = jobs.get(Number(line[0])).runs.find((x) => x.index === Number(line[1]));
    check(JSON.stringify(line.slice(csvAt + 1, csvAt + 5)) === JSON.stringify(SHAPE_COLUMNS.map(([, key]) => String(r[key]))),
      `CSV shape of ${line[0]}:${line[1]} is ${line.slice(csvAt + 1, csvAt + 5)}, the API run's ${SHAPE_COLUMNS.map(([, key]) => r[key])}`);
  }
  await shot('compare.png');
  await page.emulateMedia({colorScheme: 'dark'});
  await shot('compare-dark.png');
  await page.emulateMedia({colorScheme: 'light'});
}

// All-reduce over 2 MPI CPU ranks, when this daemon has the kind and mpirun works.
async function checkAllreduce(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('allreduce')) { log('allreduce kind absent: its page is not checked'); return; }
  // The form starts on a backend this daemon runs: mpi without a GPU (the schema's nccl is refused there).
  await page.goto(base + '/#/submit?kind=allreduce');
  await page.waitForSelector('#f-backend-mpi');
  const backend = await page.$$eval('[data-field="backend"] input:checked', (boxes) => boxes.map((b) => b.value).join());
  check(backend === (sys.gpu_count ? 'nccl' : 'mpi'), `allreduce form starts on backend ${backend} with ${sys.gpu_count} GPUs`);
  // Both ticked: the spec lists both backends (the comparison in one job).
  await page.check('#f-backend-nccl');
  const both = JSON.parse(await page.textContent('#spec-json')).backend;
  check(JSON.stringify(both) === '["nccl","mpi"]', `allreduce form with both backends ticked sends ${JSON.stringify(both)}`);
  // nccl_launch is sent only when chosen (its default, threads, left out: the spec says what was picked), and a
  // blank hostfile not at all
  const formSpec = async () => JSON.parse(await page.textContent('#spec-json'));
  let spec = await formSpec();
  check(!('nccl_launch' in spec) && !('hostfile' in spec), `allreduce form's defaults send ${JSON.stringify(spec)}`);
  await page.selectOption('#f-nccl_launch', 'processes');
  await page.fill('#f-hostfile', '/etc/lmperf/hosts');
  spec = await formSpec();
  check(spec.nccl_launch === 'processes' && spec.hostfile === '/etc/lmperf/hosts', `allreduce form with processes and a hostfile sends ${JSON.stringify(spec)}`);
  await page.selectOption('#f-nccl_launch', 'threads');
  check(!('nccl_launch' in await formSpec()), 'allreduce form back on threads still sends nccl_launch');
  const id = (await apiPost(base, {kind: 'allreduce', backend: 'mpi', sizes: ['4KB', '1MB'], world_sizes: [1, 2], warmup: 1, iterations: 3})).id;
  let job;
  try {
    job = await waitJob(base, id);
  } catch (e) {
    const j = await apiGet(base, `/v1/jobs/${id}`);
    if (/mpirun|mpi/i.test(j.error || '')) { log(`allreduce over MPI unavailable here (${j.error}): its page is not checked`); return; }
    throw e;
  }
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#allreduce-table tbody tr');
  const n = await page.$$eval('#allreduce-table tbody tr', (trs) => trs.length);
  check(n === job.runs.length, `allreduce table has ${n} rows, API ${job.runs.length}`);
  const cells = await page.$$eval('#allreduce-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  checkDecimals(cells, [2, 3, 4, 5], `allreduce job ${id}: mean, median, min, max`, true);
  checkDecimals(cells, [6, 7], `allreduce job ${id}: bandwidths`);
  // where each point's ranks ran, on hover of its Ranks cell (the run's devices)
  const titles = await page.$$eval('#allreduce-table tbody tr', (trs) => trs.map((tr) => tr.children[0].title));
  const wantTitles = [...job.runs].sort((a, b) => a.world_size - b.world_size || a.size_bytes - b.size_bytes)
    .map((r) => (r.devices && !r.oversubscribed ? `ran on ${r.devices}` : ''));
  check(wantTitles.every(Boolean) && JSON.stringify(titles) === JSON.stringify(wantTitles), `Ranks cells' titles ${JSON.stringify(titles)}, expected ${JSON.stringify(wantTitles)}`);
  const heading = await page.textContent('#allreduce-heading');
  check(heading === 'All-reduce (mpi, float32)', `an mpi job's heading reads ${heading}`);
  await checkTableExports(base, id, {}, 'all-reduce table');
  const charts = await page.$$eval('figure.chart svg.plot', (s) => s.length);
  check(charts === 3, `allreduce page shows ${charts} charts, expected time vs size, time vs ranks and bus bandwidth vs size`);
  const ranksLines = await page.$$eval('figure.chart', (figs) => figs.find((f) => f.querySelector('figcaption').textContent.includes('number of ranks'))?.querySelectorAll('path.line').length);
  check(ranksLines === 2, `time-vs-ranks chart has ${ranksLines} lines, expected one per size (2)`);
  // Overlay a second all-reduce job on the bandwidth chart.
  const other = (await apiPost(base, {kind: 'allreduce', backend: 'mpi', sizes: ['4KB', '1MB'], world_sizes: [2], warmup: 1, iterations: 3, label: 'overlay'})).id;
  await waitJob(base, other);
  await page.reload();
  await page.waitForSelector(`#allreduce-other option[value="${other}"]`, {state: 'attached'});
  await page.selectOption('#allreduce-other', String(other));
  await page.waitForSelector('#allreduce-overlay svg.plot');
  const overlayLines = await page.$$eval('#allreduce-overlay path.line', (p) => p.length);
  const wantLines = new Set(job.runs.map((r) => r.world_size)).size + 1;
  check(overlayLines === wantLines, `overlay chart has ${overlayLines} lines, expected ${wantLines}`);
  await shot('job-allreduce.png');
  log(`allreduce job ${id}: table and charts shown`);
}

// Memory job: seeds' table, the stacked timeline (one area per non-empty
// category, one marker per phase), the largest allocations equal the API's.
async function checkMemory(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('memory')) { log('memory kind absent: its page is not checked'); return; }
  // Submitted from the form: custom shape, two contexts, both modes.
  await page.goto(base + '/#/submit?kind=memory');
  await page.waitForSelector('#f-model-small');
  await page.uncheck('#f-model-small');
  await page.check('#f-model-custom');
  for (const [k, v] of Object.entries(SHAPE)) await page.fill(`#f-model-${k}`, String(v));
  await page.fill('#f-context_length', CONTEXTS.join(', '));
  await page.fill('#f-batch_size', '2');
  await page.fill('#f-vocab_size', '256');
  await page.check('#f-mode-inference');
  await page.fill('#f-label', 'web test memory');
  const spec = JSON.parse(await page.textContent('#spec-json'));
  const want = {kind: 'memory', model: SHAPE, context_length: CONTEXTS, batch_size: 2, vocab_size: 256, mode: ['inference', 'train_step'], steps: 2};
  for (const [k, v] of Object.entries(want))
    check(JSON.stringify(spec[k]) === JSON.stringify(v), `memory form spec ${k} = ${JSON.stringify(spec[k])}, expected ${JSON.stringify(v)}`);
  await page.click('button[type=submit]');
  await page.waitForURL(/#\/jobs\?highlight=\d+/);
  const id = Number(new URL(page.url()).hash.match(/highlight=(\d+)/)[1]);
  const job = await waitJob(base, id);
  const table = await apiGet(base, `/v1/jobs/${id}/table?format=json`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#memory-table tbody tr');
  await page.waitForSelector('#memory-timeline');
  const seedRows = await page.$$eval('#memory-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(seedRows.length === table.rows.length, `memory seeds' table has ${seedRows.length} rows, API ${table.rows.length}`);
  table.rows.forEach((row, i) => row.forEach((v, k) => {
    if (typeof v === 'number') check(Math.abs(Number(seedRows[i][k]) - v) < 1e-9 * Math.max(1, Math.abs(v)), `memory seeds' table [${i}][${k}] ${seedRows[i][k]} != API ${v}`);
  }));
  const okRuns = job.runs.filter((r) => r.status === 'succeeded');
  for (const r of okRuns) {
    await page.selectOption('#memory-run', String(r.index));
    await page.waitForSelector('#memory-timeline');
    const nonEmpty = r.timeline.categories.filter((_, c) => r.timeline.points.some((p) => p[2 + c] > 0));
    const areas = await page.$$eval('#memory-timeline path.area', (ps) => ps.map((p) => p.dataset.category));
    check(JSON.stringify(areas) === JSON.stringify(nonEmpty), `run ${r.index}: areas ${areas} != non-empty categories ${nonEmpty}`);
    const markers = await page.$$eval('#memory-timeline line.phase-marker', (l) => l.length);
    check(markers === r.phases.length, `run ${r.index}: ${markers} phase markers, API ${r.phases.length} phases`);
    const largest = await page.$$eval('#memory-largest tbody tr', (trs) => trs.map((tr) => ({
      name: tr.children[0].textContent, category: tr.children[1].textContent, bytes: Number(tr.children[2].dataset.value), mib: tr.children[2].textContent})));
    check(largest.length === r.largest_allocations.length, `run ${r.index}: ${largest.length} largest allocations, API ${r.largest_allocations.length}`);
    r.largest_allocations.forEach((a, i) => {
      check(largest[i].name === a.name && largest[i].category === a.category && largest[i].bytes === a.bytes, `run ${r.index}: largest allocation ${i} differs from the API`);
      checkShown(largest[i].mib, a.bytes / 1048576, `run ${r.index} largest ${i} MiB`);
    });
    // a stacked weight block (name+N: q, k, v or w1, w3 in one allocation) is explained under the table, only then
    const fused = r.largest_allocations.filter((a) => /\.weight\+\d+$/.test(a.name));
    const note = await page.$eval('#memory-fused-note', (p) => p.textContent).catch(() => null);
    check(fused.length ? note && fused.every((a) => note.includes(a.name.split('.').slice(-2).join('.'))) : note === null,
      `run ${r.index}: stacked weights ${fused.map((a) => a.name)}, the note under the largest allocations: ${note}`);
    // The timeline's "Data as a table": one row per phase, its highest point (time, event, total, each
    // non-empty category) as the API's points say.
    check(await page.$('figure:has(#memory-timeline) details.chart-data'), `run ${r.index}: the memory timeline has no "Data as a table"`);
    await page.click('figure:has(#memory-timeline) details.chart-data summary');
    const tRows = await page.$$eval('#memory-timeline-table tbody tr', (trs) => trs.map((tr) => ({phase: tr.querySelector('th').textContent,
      t: Number(tr.dataset.t), event: Number(tr.dataset.event), total: Number(tr.querySelector('td[data-value]:not([data-category])')?.dataset.value),
      cats: Object.fromEntries([...tr.querySelectorAll('td[data-category]')].map((td) => [td.dataset.category, Number(td.dataset.value)])),
      visible: tr.checkVisibility()})));
    check(tRows.length === r.phases.length && tRows.every((x) => x.visible), `run ${r.index}: the timeline's data table has ${tRows.length} rows, API ${r.phases.length} phases`);
    const sum = (p) => p.slice(2).reduce((a, b) => a + b, 0);
    r.phases.forEach((ph, k) => {
      const end = k + 1 < r.phases.length ? r.phases[k + 1].start_ms : Infinity;
      const inPhase = r.timeline.points.filter((p) => (k === 0 || p[0] >= ph.start_ms) && p[0] < end);
      const top = inPhase.reduce((a, p) => (!a || sum(p) > sum(a) ? p : a), null);
      const row = tRows[k];
      check(top && row.phase.startsWith(ph.name) && row.t === top[0] && row.event === top[1] && row.total === sum(top) &&
        nonEmpty.every((c) => row.cats[c] === top[2 + r.timeline.categories.indexOf(c)]) && Object.keys(row.cats).length === nonEmpty.length,
        `run ${r.index} phase ${ph.name} ${ph.step}: data table row ${JSON.stringify(row)}, the API's highest point ${JSON.stringify(top)}`);
    });
    for (const t of ['#memory-largest', '#memory-breakdown', '#memory-estimate', '#memory-timeline-table']) await checkTableDecimals(t, `memory job ${id} run ${r.index} ${t}`);
  }
  await checkTableExports(base, id, {}, 'peak memory table');
  // Hover names the allocation (events fetched on demand); the index axis keeps the markers.
  const r = okRuns[okRuns.length - 1];
  await page.$eval('#memory-timeline', (svg) => svg.scrollIntoView({block: 'center'}));
  const box = await page.$eval('#memory-timeline', (svg) => { const b = svg.getBoundingClientRect(); return {x: b.x, y: b.y, w: b.width, h: b.height}; });
  await page.mouse.move(box.x + box.w * 0.5, box.y + box.h * 0.5);
  await page.waitForTimeout(300);
  await page.mouse.move(box.x + box.w * 0.55, box.y + box.h * 0.5);
  await page.waitForFunction(() => /total .* MiB/.test(document.querySelector('#memory-timeline .tip-text')?.textContent || '') &&
    /(alloc|free) /.test(document.querySelector('#memory-timeline .tip-text').textContent));
  await shot('job-memory.png');
  await page.check('#mem-x-index');
  const markersIdx = await page.$$eval('#memory-timeline line.phase-marker', (l) => l.length);
  check(markersIdx === r.phases.length, `index axis: ${markersIdx} phase markers, API ${r.phases.length}`);
  check((await page.textContent('#memory-timeline')).includes('event index'), 'index axis not labelled');
  log(`memory job ${id}: seeds' table, timeline areas, ${r.phases.length} phase markers and largest allocations equal the API`);

  // Compare: the memory runs' peaks, from the job page's link.
  await page.goto(`${base}/#/jobs/${id}`);
  await page.click('#memory-compare');
  await page.waitForSelector('#compare-memory tbody tr');
  const cmp = await page.$$eval('#compare-memory tbody tr', (trs) => trs.map((tr) => ({run: tr.dataset.run,
    peak: Number(tr.querySelector('td[data-key=peak]').dataset.value), peakText: tr.querySelector('td[data-key=peak]').textContent,
    ratio: Number(tr.querySelector('td[data-key=ratio]').dataset.value)})));
  check(cmp.length === okRuns.length, `compare shows ${cmp.length} memory runs, the job has ${okRuns.length}`);
  for (const row of cmp) {
    const run = okRuns.find((x) => `${id}:${x.index}` === row.run);
    check(run && row.peak === run.peak_allocated_bytes, `compare: peak of ${row.run} is ${row.peak}, API ${run && run.peak_allocated_bytes}`);
    checkShown(row.peakText, run.peak_allocated_bytes / 1048576, `compare: peak MiB of ${row.run}`);
    check(Math.abs(row.ratio - run.peak_allocated_bytes / cmp[0].peak) < 1e-12, `compare: peak ratio of ${row.run}`);
  }
  // Memory runs alone: no baseline, phase, log axes or exports (the benchmark table's and charts', which
  // did nothing here); the link to this view can be copied (it was disabled, there being no benchmark run).
  const controls = await page.$eval('#main .controls', (c) => ({fields: [...c.querySelectorAll('select, input')].map((e) => e.id || e.type),
    buttons: [...c.querySelectorAll('button')].map((b) => `${b.textContent}${b.disabled ? ' (disabled)' : ''}`)}));
  check(!controls.fields.length && JSON.stringify(controls.buttons) === '["Copy link"]',
    `compare page of memory runs alone: controls ${JSON.stringify(controls)}, expected Copy link alone, enabled`);
  // and the memory table exports as shown, under its heading
  const exportedRows = await checkMemoryExports('compare page of memory runs alone');
  check(exportedRows === okRuns.length, `compare page of memory runs alone: ${exportedRows} rows shown and exported, the job has ${okRuns.length}`);
  await shot('compare-memory.png');
  log(`compare page: ${cmp.length} memory runs' peaks equal the API's; Copy link their one control; the table's CSV and Markdown are its cells`);
}

// A memory point past memory_limit_bytes fails with its timeline up to the
// failure: the run picker offers it, the page says why, and the areas drawn
// are the API's.
async function checkMemoryOom(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('memory')) return;
  const id = (await apiPost(base, {kind: 'memory', model: SHAPE, context_length: [CONTEXTS[0], 512], batch_size: 2, vocab_size: 256,
    mode: 'train_step', memory_limit_bytes: 8000000, record_events: false, label: 'web test memory oom'})).id;
  const job = await waitJob(base, id);
  const bad = job.runs.find((r) => r.status === 'failed');
  check(bad && bad.oom && bad.timeline && bad.timeline.points.length, `memory job ${id}: no failed run with a timeline`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#memory-timeline');
  const options = await page.$$eval('#memory-run option', (os) => os.map((o) => [o.value, o.textContent]));
  const opt = options.find(([v]) => v === String(bad.index));
  check(opt && /out of memory/.test(opt[1]), `memory OOM: run ${bad.index} is not in the run picker (${JSON.stringify(options)})`);
  await page.selectOption('#memory-run', String(bad.index));
  await page.waitForSelector('#memory-run-error');
  check((await page.textContent('#memory-run-error')).includes(bad.error), 'memory OOM: the failed run\'s error is not shown');
  const nonEmpty = bad.timeline.categories.filter((_, c) => bad.timeline.points.some((p) => p[2 + c] > 0));
  const areas = await page.$$eval('#memory-timeline path.area', (ps) => ps.map((p) => p.dataset.category));
  check(JSON.stringify(areas) === JSON.stringify(nonEmpty), `memory OOM: areas ${areas} != non-empty categories ${nonEmpty}`);
  await checkAxesHoldData(`memory job ${id} run ${bad.index}`);
  // record_events false: no event-list link (its /events is a 404), a note instead
  check(!(await page.$('a[href*="/events"]')) && /not kept/.test(await page.textContent('#memory-no-events')),
    'memory job with record_events false links its (absent) event list');
  await shot('job-memory-oom.png');
  log(`memory job ${id}: the out-of-memory run's timeline is shown with its error`);
  return id;
}

// Failed points on the compare page: a memory job with an OOM point and a
// benchmark job with a point that does not fit, picked in the job list and
// compared: each failed point is a row saying OOM (or failed) with its reason,
// as on the job page and in /table, and the exports carry it.
async function checkCompareFailed(base, memoryId) {
  const huge = {d_model: 16384, d_ff: 65536, num_layers: 64, num_heads: 64};
  const benchId = (await apiPost(base, {kind: 'benchmark', label: 'web test one point fails', model: [SHAPE, huge], vocab_size: 256,
    context_length: CONTEXTS[0], batch_size: 1, warmup_steps: 1, measure_steps: 1})).id;
  const bench = await waitJob(base, benchId, {mustSucceed: false});
  const memory = await apiGet(base, `/v1/jobs/${memoryId}`);
  const badBench = bench.runs.filter((r) => r.status === 'failed'), badMem = memory.runs.filter((r) => r.status === 'failed');
  check(badBench.length === 1 && badMem.length >= 1, `expected failed points: benchmark ${badBench.length}, memory ${badMem.length}`);
  await page.goto(`${base}/#/jobs`);
  for (const id of [memoryId, benchId]) await page.check(`input[aria-label="select job ${id}"]`);
  await page.click('button:text("Compare selected")');
  await page.waitForSelector('#compare-memory tbody tr');
  const memRows = await page.$$eval('#compare-memory tbody tr', (trs) => trs.map((tr) => ({run: tr.dataset.run,
    peak: tr.querySelector('td[data-key=peak]').textContent, error: tr.querySelector('td[data-key=error]')?.textContent || ''})));
  check(memRows.length === memory.runs.length, `compare shows ${memRows.length} memory rows, the job has ${memory.runs.length} points`);
  for (const r of badMem) {
    const row = memRows.find((x) => x.run === `${memoryId}:${r.index}`);
    check(row && row.peak === 'OOM' && row.error === r.error, `compare: the OOM point ${memoryId}:${r.index} reads ${JSON.stringify(row)}, API '${r.error}'`);
  }
  const benchRows = await page.$$eval('#compare-table tbody tr', (trs) => trs.map((tr) => ({run: tr.dataset.run, text: tr.textContent,
    status: tr.querySelector('td[data-status]')?.dataset.status, speedup: tr.querySelector('td.speedup').textContent})));
  check(benchRows.length === bench.runs.length, `compare shows ${benchRows.length} benchmark rows, the job has ${bench.runs.length} points`);
  const row = benchRows.find((x) => x.run === `${benchId}:${badBench[0].index}`);
  check(row && row.status === 'failed' && row.text.includes(badBench[0].error) && row.speedup === '—',
    `compare: the benchmark point that does not fit reads ${JSON.stringify(row)}, API '${badBench[0].error}'`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export Markdown")')]);
  const md = readFileSync(await download.path(), 'utf8');
  check(md.includes(`#${benchId}.${badBench[0].index} failed: ${badBench[0].error}`), `Markdown export does not give the failed point's reason:\n${md}`);
  // beside benchmark runs the memory table exports too, its OOM rows as shown (OOM, the reason)
  const memExported = await checkMemoryExports('compare page of memory and benchmark runs');
  check(memExported === memory.runs.length, `compare page of memory and benchmark runs: ${memExported} memory rows exported, the job has ${memory.runs.length}`);
  await shot('compare-failed.png');
  log(`compare page: failed points of jobs ${memoryId} and ${benchId} shown as rows with their reasons`);
}

// Attention job from the form (naive and flash; flash points fail on the CPU
// worker): the table endpoint's table, every point, time vs sequence length
// with one line per measured (impl, d_head).
const ATTN = {impl: 'both', batch: 1, heads: 1, seq_len: [16, 32, 64], d_head: [16, 32], passes: 2, warmup: 1};
async function checkAttention(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('attention')) { log('attention kind absent: its page is not checked'); return; }
  await page.goto(base + '/#/submit?kind=attention');
  await page.waitForSelector('#f-seq_len');
  // without a GPU the form starts on naive: the schema's 'both' would fail every flash point
  const impl = await page.inputValue('#f-impl');
  check(impl === (sys.gpu_count ? 'both' : 'naive'), `attention form starts on impl ${impl} with ${sys.gpu_count} GPUs`);
  await page.selectOption('#f-impl', ATTN.impl);
  for (const k of ['batch', 'heads', 'passes', 'warmup']) await page.fill(`#f-${k}`, String(ATTN[k]));
  await page.fill('#f-seq_len', ATTN.seq_len.join(', '));
  await page.fill('#f-d_head', ATTN.d_head.join(', '));
  await page.fill('#f-label', 'web test attention');
  const spec = JSON.parse(await page.textContent('#spec-json'));
  for (const [k, v] of Object.entries({kind: 'attention', dtype: 'float32', causal: false, ...ATTN}))
    check(JSON.stringify(spec[k]) === JSON.stringify(v), `attention form spec ${k} = ${JSON.stringify(spec[k])}, expected ${JSON.stringify(v)}`);
  await page.click('button[type=submit]');
  await page.waitForURL(/#\/jobs\?highlight=\d+/);
  const id = Number(new URL(page.url()).hash.match(/highlight=(\d+)/)[1]);
  const job = await waitJob(base, id, {mustSucceed: false});
  check(job.runs.length === 12, `attention job has ${job.runs.length} runs, expected 12`);
  const naive = job.runs.filter((r) => r.impl === 'naive'), flash = job.runs.filter((r) => r.impl === 'flash');
  check(naive.every((r) => r.status === 'succeeded' && typeof r.fwd_ms === 'number'), 'naive points did not all run on the CPU');
  check(flash.every((r) => r.status === 'failed' && /flash needs a GPU/.test(r.error)), 'flash points on the CPU are not failed runs "flash needs a GPU"');
  const table = await apiGet(base, `/v1/jobs/${id}/table?format=json`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#attention-table tbody tr');
  await page.waitForSelector('#attention-chart svg.plot');
  // The table endpoint's table, cell for cell.
  const head = await page.$$eval('#attention-table thead th', (ths) => ths.map((th) => th.textContent));
  check(JSON.stringify(head) === JSON.stringify(table.columns), `attention table columns ${head} != API ${table.columns}`);
  const shown = await page.$$eval('#attention-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  check(shown.length === table.rows.length, `attention table has ${shown.length} rows, API ${table.rows.length}`);
  table.rows.forEach((row, i) => row.forEach((v, k) => {
    const text = shown[i][k];
    if (typeof v === 'number') checkShown(text, v, `attention table [${i}][${k}]`); // decimals narrowed per column
    else check(text === (v === null ? '—' : String(v)), `attention table [${i}][${k}] '${text}' != API ${JSON.stringify(v)}`);
  }));
  // Every point: measured values are the API's, failed points say why.
  const pts = await page.$$eval('#attention-runs tbody tr', (trs) => trs.map((tr) => ({run: Number(tr.dataset.run), status: tr.dataset.status,
    text: tr.textContent, fwd: tr.querySelector('td[data-value]') ? Number(tr.querySelector('td[data-value]').dataset.value) : null})));
  check(pts.length === job.runs.length, `attention points table has ${pts.length} rows, API ${job.runs.length}`);
  for (const p of pts) {
    const r = job.runs.find((x) => x.index === p.run);
    check(r && p.status === r.status, `attention point ${p.run}: status ${p.status}, API ${r && r.status}`);
    if (r.status === 'succeeded') check(p.fwd === r.fwd_ms, `attention point ${p.run}: forward ${p.fwd} != API ${r.fwd_ms}`);
    else check(p.text.includes(r.error), `attention point ${p.run} does not show its error '${r.error}'`);
  }
  check((await page.textContent('#attention-failed')).includes('flash needs a GPU'), 'failed flash points are not summarised');
  // Time vs sequence length: one line per measured (impl, d_head); log axes.
  const wantLines = new Set(naive.map((r) => r.d_head)).size;
  for (const metric of ['fwd_bwd_ms', 'fwd_ms', 'bwd_ms']) {
    await page.selectOption('#attention-metric', metric);
    const lines = await page.$$eval('#attention-chart path.line', (p) => p.length);
    check(lines === wantLines, `attention chart (${metric}) has ${lines} lines, expected ${wantLines}`);
  }
  const axes = await page.textContent('#attention-chart svg.plot');
  check(axes.includes('sequence length (log)') && axes.includes('(ms) (log)'), 'attention chart axes are not log axes');
  const desc = await page.textContent('#attention-chart');
  check(desc.includes(`median of ${ATTN.passes} passes (each timed alone) after 1 warm-up pass;`), `the attention chart's note miscounts the passes: ${desc}`);
  await page.waitForSelector('#attention-table-box .table-exports');
  await checkTableExports(base, id, {}, 'naive vs flash table');
  await shot('job-attention.png');
  log(`attention job ${id}: seeds' table equals the API's, ${pts.length} points, ${wantLines} lines, flash failures shown`);
}

// A benchmark job whose every point fails (here: does not fit in memory): the
// page says so and lists each run's error, with no header-only table.
async function checkBenchmarkAllFailed(base) {
  const huge = {d_model: 16384, d_ff: 65536, num_layers: 64, num_heads: 64};
  const id = (await apiPost(base, {kind: 'benchmark', label: 'web test all failed', model: huge, vocab_size: 256,
    context_length: [16, 32], batch_size: 1})).id;
  const job = await waitJob(base, id, {mustSucceed: false});
  check(job.status === 'failed' && job.runs.length === 2 && job.runs.every((r) => r.status === 'failed'),
    `an unfittable benchmark ended ${job.status} with runs ${JSON.stringify(job.runs.map((r) => r.status))}`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#bench-none');
  check(!(await page.$('#bench-summary')), 'a benchmark with no successful run shows a summary table');
  check((await page.textContent('#bench-none')).includes('2 of 2 failed'), `'${await page.textContent('#bench-none')}' does not count the failed runs`);
  const items = await page.$$eval('#bench-failed li', (lis) => lis.map((li) => li.textContent));
  check(items.length === 2 && items.every((t, i) => t.includes(job.runs.find((r) => r.index === i).error)),
    `failed-run list ${JSON.stringify(items)} is not the API's errors`);
  await shot('job-benchmark-all-failed.png');
  log(`benchmark job ${id}: every point failed and the page lists why`);
}

// A profile job on this daemon without a GPU is refused at submit: the form says why.
async function checkProfileRefused(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('profile')) { log('profile kind absent: its form is not checked'); return; }
  await page.goto(base + '/#/submit?kind=profile');
  await page.waitForSelector('#f-context_length');
  const mark = consoleErrors.length;
  await page.click('button[type=submit]');
  await page.waitForSelector('p.error[role=alert]:not([hidden])');
  // the browser logs the refused POST's 400 itself: expected here, nothing else is
  consoleErrors.push(...consoleErrors.splice(mark).filter((e) => !/status of 400/.test(e)));
  const alert = await page.textContent('p.error[role=alert]');
  check(/^400 invalid_spec: profile jobs need a GPU worker; there is no GPU here/.test(alert),
    `the profile form on a daemon without a GPU shows '${alert}', not the refusal`);
  check(page.url().includes('#/submit'), `a refused profile job left the form for ${page.url()}`);
  await shot('submit-profile-refused.png');
  log(`profile job refused on the CPU-only daemon and the form says: ${alert}`);
}

// OOM points in the attention chart (a GPU shows them; the CPU cannot): the
// chart module given runs of the API's shape marks each as ✕ with an OOM key.
async function checkOomMarks() {
  const result = await page.evaluate(async () => {
    const {lineChart} = await import('/chart.js');
    const {attentionSeries} = await import('/attention.js');
    const run = (impl, d, T, oom) => ({status: 'succeeded', impl, dtype: 'float32', d_head: d, seq_len: T, oom,
      ...(oom ? {oom_request_bytes: 2 ** 34} : {fwd_ms: T / 100, bwd_ms: T / 50, fwd_bwd_ms: 3 * T / 100})});
    const runs = [256, 1024, 4096, 16384].flatMap((T) => [run('naive', 64, T, T > 4096), run('flash', 64, T, false)]);
    const fig = lineChart({title: 'oom', series: attentionSeries(runs, 'fwd_bwd_ms'), xLabel: 'sequence length', yLabel: 'ms',
      logX: true, xBase: 2, logY: true, markLabel: 'OOM'});
    document.querySelector('main').append(fig);
    const out = {lines: fig.querySelectorAll('path.line').length, marks: fig.querySelectorAll('path.marker.mark').length,
      key: fig.querySelector('.legend .mark-key')?.textContent || '', cell: [...fig.querySelectorAll('table.data td')].some((td) => td.textContent === 'OOM')};
    fig.remove();
    return out;
  });
  check(result.lines === 2 && result.marks === 1 && /OOM/.test(result.key) && result.cell,
    `OOM points: ${JSON.stringify(result)}, expected 2 lines, 1 ✕, an OOM legend key and an OOM cell`);
  log('attention chart marks OOM points');
}

// An attention job whose every point ran out of memory (the CPU worker runs out
// at these shapes too): its time chart still draws one ✕ per point and says
// that every point ran out of memory, not 'No data to plot'.
async function checkAttentionAllOom(base) {
  const sys = await apiGet(base, '/v1/system');
  if (!sys.kinds.includes('attention')) { log('attention kind absent: an all-OOM job is not checked'); return; }
  const id = (await apiPost(base, {kind: 'attention', label: 'web test attention all OOM', batch: 64, heads: 1000,
    seq_len: [16384, 65536], d_head: 16, impl: 'naive', dtype: 'float32'})).id;
  const job = await waitJob(base, id);
  check(job.runs.length === 2 && job.runs.every((r) => r.oom === true), `attention job ${id}: not every point ran out of memory`);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#attention-chart figure');
  const chart = await page.$eval('#attention-chart', (el) => ({text: el.textContent,
    marks: [...el.querySelectorAll('path.marker.mark')].map((m) => Number(m.dataset.x))}));
  check(!chart.text.includes('No data to plot') && chart.text.includes('every point ran out of memory'),
    `attention job ${id}, every point OOM: the chart reads '${chart.text.slice(0, 120)}'`);
  check(JSON.stringify(chart.marks.sort((a, b) => a - b)) === JSON.stringify(job.runs.map((r) => r.seq_len).sort((a, b) => a - b)),
    `attention job ${id}, every point OOM: ✕ at ${chart.marks}, API OOM at ${job.runs.map((r) => r.seq_len)}`);
  await shot('job-attention-all-oom.png');
  log(`attention job ${id}: every point out of memory, ${chart.marks.length} ✕ on its chart`);
}

// Saved real runs from a GPU (fixtures/gpu-h200.db.gz: the database of an
// lmperfd that ran a profile job — small, context 128, fp32 and bf16 — and an
// attention job with OOM points on an H200), served by a second real lmperfd
// (CPU worker; it only reads them back). The profile page's success path and
// the attention page's OOM rows, against that daemon's API.
async function checkGpuFixture() {
  const fixture = join(HERE, 'fixtures/gpu-h200.db.gz');
  if (!existsSync(fixture)) { log('no GPU fixture: the profile summary page is not checked'); return; }
  const db = join(tmp, 'gpu-fixture.db');
  writeFileSync(db, gunzipSync(readFileSync(fixture)));
  // plus a synthesized all-reduce job of both backends (fixtures/allreduce-nccl-mpi.sql says how it was made)
  const added = spawnSync('sqlite3', [db], {input: readFileSync(join(HERE, 'fixtures/allreduce-nccl-mpi.sql')), encoding: 'utf8'});
  check(added.status === 0, `sqlite3 could not add fixtures/allreduce-nccl-mpi.sql: ${added.error || added.stderr}`);
  // the newest profile job's first run with the spread over its steps (0028's *_std fields, which the fixture,
  // stored before them, lacks; made up here: 1 % of each mean): the page shows it "mean ± std"; the other runs
  // stay as stored, the mean alone
  const stdFields = ['event_ns_unprofiled', 'event_ns_profiled', 'gated_ns_unprofiled', 'gated_ns_profiled'].flatMap((key) =>
    [0, 1, 2, 3].map((i) => `'$.phases[${i}].${key}_std', json_extract(result, '$.phases[${i}].${key}') * 0.01`));
  const withStd = spawnSync('sqlite3', [db], {encoding: 'utf8', input: `UPDATE runs SET result = json_set(result,
    '$.step_ms_unprofiled_std', json_extract(result, '$.step_ms_unprofiled') * 0.01,
    '$.step_ms_profiled_std', json_extract(result, '$.step_ms_profiled') * 0.01, ${stdFields.join(', ')})
    WHERE run_index = 0 AND job_id = (SELECT max(id) FROM jobs WHERE kind = 'profile');`});
  check(withStd.status === 0, `sqlite3 could not add the std fields to the profile fixture: ${withStd.error || withStd.stderr}`);
  // the all-reduce job's runs say how they were launched (0031's launch, which the fixture, made before it, lacks;
  // synthesized: nccl as one process per GPU, mpi always processes); its allreduce_runs rows stay as stored
  const launched = spawnSync('sqlite3', [db], {encoding: 'utf8', input: `UPDATE runs SET result = json_set(result, '$.launch', 'processes')
    WHERE job_id = 900; UPDATE jobs SET spec = json_set(spec, '$.nccl_launch', 'processes') WHERE id = 900;`});
  check(launched.status === 0, `sqlite3 could not add the launch to the all-reduce fixture: ${launched.error || launched.stderr}`);
  // and each phase's span split by what ran (0030's gemm_busy_ns, other_only_ns, gpu_idle_ns, which the fixture,
  // stored before them, lacks): synthesized, three parts adding up to the phase's gpu_span_ns
  const span = (i) => `json_extract(result, '$.phases[${i}].gpu_span_ns')`;
  const busy = (i) => `min(coalesce(json_extract(result, '$.phases[${i}].kernel_busy_ns'), json_extract(result, '$.phases[${i}].kernel_ns')), ${span(i)})`;
  const splitFields = [0, 1, 2, 3].map((i) => `'$.phases[${i}].gemm_busy_ns', round(${busy(i)} * 0.75),
    '$.phases[${i}].other_only_ns', ${busy(i)} - round(${busy(i)} * 0.75),
    '$.phases[${i}].gpu_idle_ns', ${span(i)} - ${busy(i)}`);
  const withSplit = spawnSync('sqlite3', [db], {encoding: 'utf8', input: `UPDATE runs SET result = json_set(result, ${splitFields.join(', ')})
    WHERE run_index = 0 AND job_id = (SELECT max(id) FROM jobs WHERE kind = 'profile') AND json_array_length(result, '$.phases') = 4;`});
  check(withSplit.status === 0, `sqlite3 could not add the GPU split to the profile fixture: ${withSplit.error || withSplit.stderr}`);
  const portFile = join(tmp, 'fixture-port');
  fixtureDaemon = spawn(lmperfd, ['--port', '0', '--port-file', portFile, '--db', db, '--web-root', join(sourceRoot, 'web'), '--cpu-only'],
    {stdio: ['ignore', 'inherit', 'inherit']});
  let base = null;
  for (let i = 0; i < 200 && !base; i++) {
    if (existsSync(portFile) && readFileSync(portFile, 'utf8').trim()) {
      const b = `http://127.0.0.1:${readFileSync(portFile, 'utf8').trim()}`;
      try { if ((await fetch(b + '/healthz')).ok) base = b; } catch { /* not yet */ }
    }
    if (!base) await new Promise((r) => setTimeout(r, 50));
  }
  check(base, 'the fixture lmperfd did not start');
  const list = (await apiGet(base, '/v1/jobs')).jobs;
  // the newest profile job (a later fixture adds one traced as CUDA-graph replays, with per-phase overhead)
  const profId = Math.max(...list.filter((j) => j.kind === 'profile').map((j) => j.id));
  const prof = await apiGet(base, `/v1/jobs/${profId}`);
  const runs = prof.runs.filter((r) => r.kernel_summary);
  check(runs.length >= 2, `fixture profile job has ${runs.length} traced runs`);

  await page.goto(`${base}/#/jobs/${prof.id}`);
  await page.waitForSelector('#profile-kernels tbody tr');
  const run = runs[0];
  const ranges = [...new Set(run.kernel_summary.map((k) => k.range))].sort();
  const options = await page.$$eval('#profile-range option', (os) => os.map((o) => o.value));
  check(JSON.stringify([...options].sort()) === JSON.stringify(ranges), `range picker ${options} != the run's ranges ${ranges}`);
  check(await page.$eval('#profile-range', (s) => s.value) === 'forward', 'the range picker does not start at forward');
  const rowsOf = () => page.$$eval('#profile-kernels tbody tr', (trs) => trs.map((tr) => ({kernel: tr.dataset.kernel,
    ...Object.fromEntries([...tr.children].map((td, i) => [tr.closest('table').querySelectorAll('thead th')[i].dataset.key, td.dataset.value]))})));
  const sameRows = async (range, what) => {
    const want = run.kernel_summary.filter((k) => k.range === range);
    const got = await rowsOf();
    check(got.length === want.length, `${what}: ${got.length} kernel rows, API ${want.length}`);
    for (const k of want) {
      const g = got.find((x) => x.kernel === k.kernel);
      check(g && Number(g.total_ns) === k.total_ns && Number(g.instances) === k.instances && Number(g.share_pct) === k.share_pct,
        `${what}: kernel ${k.kernel} differs from the API`);
    }
    return got;
  };
  let got = await sameRows('forward', 'forward');
  for (const t of ['#profile-kernels', '#profile-roofline', '#profile-phases']) await checkTableDecimals(t, `profile job ${prof.id} (fixture) ${t}`);
  check(got.every((r, i) => i === 0 || Number(got[i - 1].total_ns) >= Number(r.total_ns)), 'kernel table does not start sorted by total time, descending');
  // Sorting: total ascending, then instances descending.
  await page.click('#profile-kernels th[data-key="total_ns"] button');
  got = await rowsOf();
  check(got.every((r, i) => i === 0 || Number(got[i - 1].total_ns) <= Number(r.total_ns)), 'total time does not sort ascending on a second click');
  check(await page.$eval('#profile-kernels th[data-key="total_ns"]', (th) => th.getAttribute('aria-sort')) === 'ascending', 'aria-sort not updated');
  await page.click('#profile-kernels th[data-key="instances"] button');
  got = await rowsOf();
  check(got.every((r, i) => i === 0 || Number(got[i - 1].instances) >= Number(r.instances)), 'instances do not sort descending');
  // Another range, the name filter.
  await page.selectOption('#profile-range', '(all)');
  await sameRows('(all)', '(all)');
  await page.fill('#profile-filter', 'gemm');
  got = await rowsOf();
  const gemms = run.kernel_summary.filter((k) => k.range === '(all)' && k.kernel.toLowerCase().includes('gemm'));
  check(got.length === gemms.length && got.every((r) => /gemm/i.test(r.kernel)), `filter 'gemm' shows ${got.length} rows, expected ${gemms.length}`);
  // Answers, roofline, trace.
  // the forward's times say which clock each is (the CPU range is the launches, not the forward's duration)
  const fwdTimes = await page.textContent('#profile-forward-times');
  const clock = (label) => Number((fwdTimes.match(new RegExp(`${label} ([\\d.,]+) ms`)) || [])[1]?.replace(/,/g, ''));
  check(Math.abs(clock('on the GPU') - run.forward_gpu_span_ns / 1e6) <= 0.005 && Math.abs(clock('CPU range') - run.forward_wall_ns / 1e6) <= 0.005 &&
    fwdTimes.includes('(push to pop: launching, not waiting for the GPU)'), `the forward's times read: ${fwdTimes}`);
  const kernelTotal = await page.textContent('#profile-kernel-total');
  check(run.profile_steps > 1 ? kernelTotal.endsWith(`over the ${run.profile_steps} traced steps`) : !kernelTotal.includes('over'),
    `the kernel totals of ${run.profile_steps} traced steps read: ${kernelTotal}`);
  const answers = await page.textContent('#profile-answers');
  check(answers.includes(run.answers.top_forward_kernel), 'answers do not name the top forward kernel');
  // the seeds' question (c), asked of the forward pass: its non-GEMM kernels above 2 % of the forward's kernel time,
  // largest first, as the API's forward kernel summary has them; the step's list, largest first, as the answers have it
  const listed = (answer) => page.$$eval(`#profile-answers li[data-answer="${answer}"] li code`, (cs) => cs.map((c) => c.textContent));
  const fwdWant = run.kernel_summary.filter((k) => k.range === 'forward' && !k.is_gemm && k.share_pct > 2)
    .sort((x, y) => y.share_pct - x.share_pct).map((k) => k.kernel);
  const fwdGot = await listed('non_gemm_forward');
  check(fwdWant.length && JSON.stringify(fwdGot) === JSON.stringify(fwdWant),
    `non-GEMM kernels of the forward: the page lists ${JSON.stringify(fwdGot)}, the API's forward summary ${JSON.stringify(fwdWant)}`);
  const stepWant = [...run.answers.non_gemm_above_2pct].sort((x, y) => y.share_pct - x.share_pct).map((k) => k.kernel);
  const stepGot = await listed('non_gemm');
  check(JSON.stringify(stepGot) === JSON.stringify(stepWant), `non-GEMM kernels of the step: the page lists ${JSON.stringify(stepGot)}, the API ${JSON.stringify(stepWant)}`);
  const roof = await page.$$eval('#profile-roofline tbody tr', (trs) => trs.map((tr) => tr.querySelector('th').textContent));
  check(JSON.stringify(roof) === JSON.stringify(run.roofline.map((r) => r.op)), `roofline ops ${roof} != API`);
  const href = await page.getAttribute('#profile-trace', 'href');
  check(href === `/v1/jobs/${prof.id}/trace?run=${run.index}`, `trace link is ${href}`);
  const trace = await apiGet(base, href);
  check(Array.isArray(trace.traceEvents) && trace.traceEvents.length > 0, 'trace link does not give a Chrome trace');
  // The per-phase overhead (runs with phases): one row per phase, untraced and traced event times as the API says.
  const phaseRows = await page.$$eval('#profile-phases tbody tr', (trs) => trs.map((tr) => ({phase: tr.dataset.phase,
    values: [...tr.querySelectorAll('td')].map((td) => td.dataset.value)})));
  if (run.phases) {
    check(JSON.stringify(phaseRows.map((p) => p.phase)) === JSON.stringify(run.phases.map((p) => p.phase)),
      `phase rows ${phaseRows.map((p) => p.phase)} != API ${run.phases.map((p) => p.phase)}`);
    for (const p of run.phases) {
      const row = phaseRows.find((x) => x.phase === p.phase);
      const over = 100 * (p.event_ns_profiled - p.event_ns_unprofiled) / p.event_ns_unprofiled;
      check(row && Number(row.values[1]) === p.event_ns_unprofiled && Number(row.values[2]) === p.event_ns_profiled &&
        Math.abs(Number(row.values[3]) - over) < 1e-9, `phase ${p.phase}: the overhead row differs from the API`);
      // gpu_gated: the gated times as the API says, empty cells where not gated (eager, or stored before 0014)
      const gated = typeof p.gated_ns_unprofiled === 'number';
      check(gated ? Number(row.values[4]) === p.gated_ns_unprofiled && Number(row.values[5]) === p.gated_ns_profiled
        : row.values[4] === undefined && row.values[5] === undefined && row.values[6] === undefined,
        `phase ${p.phase}: the gated cells differ from the API (${row.values.slice(4, 7)})`);
      // kernels summed, busy (the union of their intervals; empty for runs stored before it), span, % of busy
      check(Number(row.values[7]) === p.kernel_ns && (typeof p.kernel_busy_ns === 'number'
        ? Number(row.values[8]) === p.kernel_busy_ns : row.values[8] === undefined) &&
        Number(row.values[9]) === p.gpu_span_ns, `phase ${p.phase}: the kernel cells differ from the API (${row.values.slice(7, 10)})`);
    }
    // mean ± std where the run has the spread (data-std the API's std, both with the column's decimals), the mean
    // alone where it has not
    const stdCells = await page.$$eval('#profile-phases tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')]
      .map((td) => ({std: td.dataset.std, text: td.textContent}))));
    for (const [i, p] of run.phases.entries()) {
      for (const [col, key] of [[1, 'event_ns_unprofiled'], [2, 'event_ns_profiled'], [4, 'gated_ns_unprofiled'], [5, 'gated_ns_profiled']]) {
        const cell = stdCells[i][col], sd = p[`${key}_std`];
        check(typeof sd === 'number' ? Number(cell.std) === sd && / ± /.test(cell.text) : cell.std === undefined && !cell.text.includes('±'),
          `phase ${p.phase} ${key}: the cell reads '${cell.text}' (data-std ${cell.std}), the API's std ${sd}`);
      }
    }
    const stepText = await page.textContent('#profile-step-untraced');
    check(typeof run.step_ms_unprofiled_std === 'number' ? / ± /.test(stepText) : !stepText.includes('±'),
      `the untraced step reads '${stepText}', its std ${run.step_ms_unprofiled_std}`);
    const gatedNote = await page.textContent('#profile-gated-note');
    check(gatedNote && /[Gg]ated/.test(gatedNote), `the phase table does not say what gated means: ${gatedNote}`);
    const facts = await page.textContent('#profile-facts');
    check(run.graphs === undefined || facts.includes(run.graphs ? 'CUDA-graph replays' : 'eager'), 'the facts do not say how the steps ran');
    log(`profile phases: ${phaseRows.length} rows (untraced vs traced per phase) equal the API`);
    // what the GPU ran per phase: a row per phase with the split, the API's ns in data-value, the shares of the span
    // adding up to 100 %
    const splitWant = run.phases.filter((p) => typeof p.gemm_busy_ns === 'number' && p.gpu_span_ns > 0);
    check(splitWant.length === run.phases.length, `the fixture's run 0 has the split for ${splitWant.length} of ${run.phases.length} phases`);
    const splitRows = await page.$$eval('#profile-gpu-split tbody tr', (trs) => trs.map((tr) => ({phase: tr.dataset.phase,
      values: [...tr.querySelectorAll('td')].map((td) => Number(td.dataset.value)), text: [...tr.querySelectorAll('td')].map((td) => td.textContent)})));
    check(JSON.stringify(splitRows.map((r) => r.phase)) === JSON.stringify(splitWant.map((p) => p.phase)),
      `GPU split rows ${splitRows.map((r) => r.phase)} != API ${splitWant.map((p) => p.phase)}`);
    for (const p of splitWant) {
      const row = splitRows.find((r) => r.phase === p.phase);
      const [sp, gemm, gemmPct, other, otherPct, idle, idlePct] = row ? row.values : [];
      check(row && sp === p.gpu_span_ns && gemm === p.gemm_busy_ns && other === p.other_only_ns && idle === p.gpu_idle_ns &&
        Math.abs(gemmPct + otherPct + idlePct - 100) < 1e-9 && Math.abs(gemmPct - 100 * p.gemm_busy_ns / p.gpu_span_ns) < 1e-9,
        `phase ${p.phase}: the GPU split row ${row && row.values} differs from the API or its shares do not add up`);
      const shown = row ? row.text[0].replace(/,/g, '') : '', digits = (shown.split('.')[1] || '').length;
      check(row && Math.abs(Number(shown) - p.gpu_span_ns / 1e6) <= 0.5 * 10 ** -digits + 1e-12 && row.text[2].endsWith('%'),
        `phase ${p.phase}: the GPU split reads ${row && row.text}`);
    }
    await checkTableDecimals('#profile-gpu-split', `profile job ${prof.id} (fixture) #profile-gpu-split`);
    log(`profile GPU split: ${splitRows.length} rows equal the API`);
  } else {
    check(phaseRows.length === 0, 'a run without phases shows a phase table');
  }
  await page.fill('#profile-filter', '');
  await page.selectOption('#profile-range', 'forward');
  // Long demangled names at 1280 px: the table fits its box (no Kernel column clipped), a name wraps only at
  // its break points (spaces, after _ , :: or before < ( : no piece of it split across lines), the full name is the
  // cell's title and one click away; the numbers stay right-aligned.
  const kern = await page.$eval('#profile-kernels', (t) => ({over: t.scrollWidth - t.parentElement.clientWidth,
    split: [...t.querySelectorAll('td.kernel')].flatMap((td) => {
      const out = [];
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        if (!n.parentElement.checkVisibility()) continue;
        for (const m of n.data.matchAll(/\S+/g)) {
          const r = document.createRange();
          r.setStart(n, m.index);
          r.setEnd(n, m.index + m[0].length);
          if (new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size > 1) out.push(m[0]);
        }
      }
      return out;
    }),
    untitled: [...t.querySelectorAll('tbody tr')].filter((tr) => tr.querySelector('td.kernel').title !== tr.dataset.kernel).map((tr) => tr.dataset.kernel),
    left: [...t.querySelectorAll('td.num')].filter((td) => getComputedStyle(td).textAlign !== 'right').length}));
  check(kern.over <= 0, `profile kernel table at 1280 px is ${kern.over} px wider than its box: the Kernel column is clipped`);
  check(!kern.split.length, `kernel names split inside a piece: ${kern.split.slice(0, 3).join(' | ')}`);
  check(!kern.untitled.length && !kern.left, `kernel cells without their full name as title: ${kern.untitled.join(', ')}; ${kern.left} numbers not right-aligned`);
  const longRow = run.kernel_summary.find((k) => k.range === 'forward' && /\(.*\)$/.test(k.kernel));
  if (longRow) {
    const cell = page.locator(`#profile-kernels tr[data-kernel="${longRow.kernel.replace(/["\\]/g, '\\$&')}"] td.kernel`);
    const before = await cell.innerText();
    check(!before.includes(longRow.kernel), `kernel ${longRow.kernel}: the full name is shown before it is asked for`);
    await cell.locator('summary').click();
    const full = await cell.locator('code.kfull').innerText();
    check(full.replace(/\s+/g, ' ') === longRow.kernel, `kernel ${longRow.kernel}: expanded, it reads ${full}`);
  }
  await shot('job-profile.png');
  await checkPageFits(`profile job ${prof.id} (fixture)`);
  // The range's table download: the table endpoint narrowed to this run and range, as many rows as the page's table.
  const mdHref = await page.getAttribute('#profile-range-table a[data-format="md"]', 'href');
  const shownRange = await page.inputValue('#profile-range');
  check(mdHref.includes(`run=${runs[0].index}`) && new URLSearchParams(mdHref.split('?')[1]).get('range') === shownRange,
    `range table link ${mdHref} is not run ${runs[0].index}, range ${shownRange}`);
  const mdLines = (await (await fetch(base + mdHref)).text()).trim().split('\n');
  const inRange = runs[0].kernel_summary.filter((k) => k.range === shownRange).length;
  check(mdLines.length === inRange + 2 && mdLines.slice(2).every((l) => l.includes(`| ${shownRange} |`)),
    `range table download has ${mdLines.length - 2} rows, the range ${inRange}`);
  // The other run (bf16).
  await page.selectOption('#profile-run', String(runs[1].index));
  const other = await rowsOf();
  check(other.length === runs[1].kernel_summary.filter((k) => k.range === 'forward').length, 'run picker does not switch the kernel table');
  // a run stored without the spread over its steps (before 0028): its phase times are the means alone
  if (runs[1].phases && !runs[1].phases.some((p) => typeof p.event_ns_unprofiled_std === 'number')) {
    const texts = await page.$$eval('#profile-phases tbody td', (tds) => tds.map((td) => td.textContent));
    check(texts.length && !texts.some((t) => t.includes('±')), `run ${runs[1].index} without std shows: ${texts.join(' | ')}`);
  }
  log(`profile job ${prof.id} (H200 fixture): kernel table per range equals the API, sorts, filters; answers, roofline, trace link`);

  // Attention with OOM points.
  const att = await apiGet(base, `/v1/jobs/${list.find((j) => j.kind === 'attention').id}`);
  const ooms = att.runs.filter((r) => r.oom === true);
  check(ooms.length > 0, 'fixture attention job has no OOM points');
  await page.goto(`${base}/#/jobs/${att.id}`);
  await page.waitForSelector('#attention-table tbody tr');
  await page.waitForSelector('#attention-chart svg.plot');
  const oomRows = await page.$$eval('#attention-runs tr[data-status="oom"]', (trs) => trs.map((tr) => Number(tr.dataset.run)));
  check(JSON.stringify(oomRows.sort()) === JSON.stringify(ooms.map((r) => r.index).sort()), `OOM rows ${oomRows} != API ${ooms.map((r) => r.index)}`);
  // the request is in the unit it is large in: "an allocation of 32.0 GiB", not "32,768.0 MiB"
  const asked = await page.$$eval('#attention-runs tr[data-status="oom"] td.oom', (tds) => tds.map((td) => td.textContent));
  const big = ooms.filter((r) => r.oom_request_bytes >= 2 ** 30).length;
  check(asked.filter((t) => /allocation of \d[\d.]* GiB did not fit/.test(t)).length === big && big > 0,
    `OOM rows' requests ${JSON.stringify(asked)}, expected ${big} in GiB`);
  const marks = await page.$$eval('#attention-chart path.marker.mark', (p) => p.length);
  check(marks === ooms.length, `attention chart has ${marks} OOM marks, API ${ooms.length} OOM points`);
  const oomCells = await page.$$eval('#attention-table td.oom', (tds) => tds.length);
  const table = await apiGet(base, `/v1/jobs/${att.id}/table?format=json`);
  // one number of decimals per column: the page's two tables, and the md and csv forms alike
  const msCols = table.columns.map((c, k) => (/\((ms|MiB)\)/.test(c) ? k : -1)).filter((k) => k >= 0);
  const shownTable = await page.$$eval('#attention-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  checkDecimals(shownTable, msCols, `attention job ${att.id} (fixture): naive vs flash table`);
  const mdRows = (await (await fetch(`${base}/v1/jobs/${att.id}/table?format=md`)).text()).trim().split('\n').slice(2)
    .map((l) => l.split('|').slice(1, -1).map((c) => c.trim()));
  checkDecimals(mdRows, msCols, `attention job ${att.id} (fixture): md table`);
  check(JSON.stringify(mdRows.map((r) => msCols.map((k) => r[k]))) === JSON.stringify(shownTable.map((r) => msCols.map((k) => r[k] === '—' ? '' : r[k]))),
    `attention job ${att.id} (fixture): the page's table differs from the md table`);
  const csvRows = (await (await fetch(`${base}/v1/jobs/${att.id}/table?format=csv`)).text()).trim().split('\r\n').slice(1).map((l) => l.split(','));
  checkDecimals(csvRows, msCols, `attention job ${att.id} (fixture): csv table`);
  const points = await page.$$eval('#attention-runs tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const pointCols = await page.$$eval('#attention-runs thead th', (ths) => ths.map((th, k) => (/\((ms|MiB)\)|TFLOP/.test(th.textContent) ? k : -1)).filter((k) => k >= 0));
  checkDecimals(points.filter((r) => r.length > 6), pointCols, `attention job ${att.id} (fixture): every point`);
  check(oomCells === table.rows.flat().filter((v) => v === 'OOM').length, 'the table endpoint\'s OOM cells are not all shown');
  const lines = await page.$$eval('#attention-chart path.line', (p) => p.length);
  const want = new Set(att.runs.filter((r) => typeof r.fwd_ms === 'number').map((r) => `${r.impl}|${r.d_head}`)).size;
  check(lines === want, `attention chart has ${lines} lines, expected ${want}`);
  const memLines = await page.$$eval('#attention-memory-chart path.line', (p) => p.length);
  check(memLines === want, `attention memory chart has ${memLines} lines, expected ${want}`);
  await shot('job-attention-gpu.png');
  await page.emulateMedia({colorScheme: 'dark'});
  await shot('job-attention-gpu-dark.png');
  await page.emulateMedia({colorScheme: 'light'});
  log(`attention job ${att.id} (H200 fixture): ${ooms.length} OOM rows and marks, ${lines} lines`);

  await checkTwoBackendAllreduce(base, list.find((j) => j.kind === 'allreduce' && Array.isArray(j.spec.backend)));
}

// One all-reduce job of both backends (seed 002: NCCL vs the CPU baseline): the
// table has a Backend column and every chart one line per (backend, world size)
// or (backend, size); the md table groups the rows by backend.
async function checkTwoBackendAllreduce(base, summary) {
  check(summary, 'the fixture has no all-reduce job with a backend list');
  const job = await apiGet(base, `/v1/jobs/${summary.id}`);
  await page.goto(`${base}/#/jobs/${job.id}`);
  await page.waitForSelector('#allreduce-table tbody tr');
  const head = await page.$$eval('#allreduce-table thead th', (ths) => ths.map((th) => th.textContent));
  check(head[0] === 'Backend', `two-backend all-reduce table's first column is ${head[0]}, expected Backend`);
  // the fixture's nccl runs say they ran as processes (checkGpuFixture adds 0031's launch): the heading names it
  const heading = await page.textContent('#allreduce-heading');
  check(heading === 'All-reduce (nccl (processes) vs mpi, float32)', `the two-backend heading reads ${heading}`);
  const shown = await page.$$eval('#allreduce-table tbody tr', (trs) => trs.map((tr) => tr.children[0].textContent));
  const order = ['nccl', 'mpi'];
  const want = job.runs.map((r) => r.backend).sort((a, b) => order.indexOf(a) - order.indexOf(b));
  check(JSON.stringify(shown) === JSON.stringify(want), `all-reduce table's backends ${shown}, API (grouped) ${want}`);
  const legends = await page.$$eval('figure.chart', (figs) => Object.fromEntries(figs.map((f) =>
    [f.querySelector('figcaption').textContent, [...f.querySelectorAll('.legend li')].map((li) => li.textContent)])));
  const ok = job.runs.filter((r) => r.status === 'succeeded');
  const pairs = (key, name) => [...new Set(order.flatMap((be) => ok.filter((r) => r.backend === be).sort((a, b) => a[key] - b[key]).map((r) => `${be}, ${name(r)}`)))];
  const bySize = pairs('world_size', (r) => `${r.world_size} ranks`);
  check(bySize.length === 3, `fixture all-reduce job: ${bySize.length} (backend, world size) pairs, expected 3`);
  const sizeChart = Object.keys(legends).find((t) => t.includes('time vs size'));
  check(JSON.stringify(legends[sizeChart]) === JSON.stringify(bySize), `time-vs-size legend ${JSON.stringify(legends[sizeChart])}, expected ${JSON.stringify(bySize)}`);
  const busChart = Object.keys(legends).find((t) => t.startsWith('Bus bandwidth vs size'));
  check(JSON.stringify(legends[busChart]) === JSON.stringify(bySize), `bandwidth legend ${JSON.stringify(legends[busChart])}, expected ${JSON.stringify(bySize)}`);
  const byRanks = pairs('size_bytes', (r) => r.size);
  const ranksChart = Object.keys(legends).find((t) => t.includes('number of ranks'));
  check(legends[ranksChart] && legends[ranksChart].length === byRanks.length && legends[ranksChart].every((n, i) => n.startsWith(byRanks[i].split(',')[0] + ',')),
    `time-vs-ranks legend ${JSON.stringify(legends[ranksChart])}, expected one line per (backend, size): ${JSON.stringify(byRanks)}`);
  const md = (await (await fetch(`${base}/v1/jobs/${job.id}/table?format=md`)).text()).trim().split('\n').slice(2).map((l) => l.split('|')[1].trim());
  check(JSON.stringify(md) === JSON.stringify(want), `md table's backends ${md}, expected grouped ${want}`);
  // the oversubscribed points (mpi, more ranks than cores; the md's "oversubscribed" column) are flagged row by row
  // and said above the charts, as their times (and the time vs ranks trend) are inflated
  const rowsOver = await page.$$eval('#allreduce-table tbody tr', (trs) => trs.map((tr) => tr.children[1].dataset.oversubscribed === 'yes' && !!tr.children[1].querySelector('.warn-mark')));
  const overWant = [...job.runs].sort((a, b) => order.indexOf(a.backend) - order.indexOf(b.backend) || a.world_size - b.world_size || a.size_bytes - b.size_bytes)
    .map((r) => r.status === 'succeeded' && r.oversubscribed === true);
  check(overWant.some((x) => x) && JSON.stringify(rowsOver) === JSON.stringify(overWant), `oversubscribed marks ${rowsOver}, API ${overWant}`);
  const overNote = await page.textContent('#allreduce-oversubscribed');
  check(overNote.includes(`${overWant.filter((x) => x).length} of ${job.runs.length} points`), `the oversubscribed note reads: ${overNote}`);
  await shot('job-allreduce-two-backends.png');
  log(`allreduce job ${job.id} (synthesized fixture rows): nccl and mpi in one table and one line per (backend, ranks)`);
}

// Charts stay usable with many points: 20,000 points render in well under 2 s.
async function checkBigChart(base) {
  const result = await page.evaluate(async () => {
    const {lineChart} = await import('/chart.js');
    const points = Array.from({length: 20000}, (_, i) => ({x: i, y: 10 + Math.sin(i / 50) + (i % 7) / 10}));
    const t0 = performance.now();
    const fig = lineChart({title: 'big', series: [{name: 'a', points}, {name: 'b', points: points.map((p) => ({x: p.x, y: p.y * 2}))}], xLabel: 'step', yLabel: 'ms'});
    document.querySelector('main').append(fig);
    fig.getBoundingClientRect();
    const ms = performance.now() - t0;
    const paths = fig.querySelectorAll('path.line').length, markers = fig.querySelectorAll('.marker').length;
    fig.remove();
    return {ms, paths, markers};
  });
  check(result.paths === 2 && result.markers === 0, `big chart drew ${result.paths} lines and ${result.markers} markers`);
  check(result.ms < 2000, `a 40,000-point chart took ${result.ms.toFixed(0)} ms to build`);
  log(`40,000-point chart built in ${result.ms.toFixed(0)} ms`);
}

// A narrow window (800 px): the job list's labels wrap between words, not
// inside them ("tiny warm|up 2"), while the table scrolls.
async function checkNarrowJobs(base) {
  await page.setViewportSize({width: 800, height: 900});
  await page.goto(base + '/#/jobs');
  await page.waitForSelector('table.jobs tbody tr td.label');
  const broken = await page.$$eval('table.jobs td.label', (tds) => tds.flatMap((td) => {
    const text = td.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) return [];
    const out = [];
    for (const m of text.data.matchAll(/\S+/g)) {
      if (m[0].length > 16) continue; /* a long unbroken label may wrap anywhere */
      const r = document.createRange();
      r.setStart(text, m.index);
      r.setEnd(text, m.index + m[0].length);
      if (new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size > 1) out.push(m[0]);
    }
    return out;
  }));
  await shot('jobs-800.png');
  check(!broken.length, `jobs list at 800 px breaks label words: ${broken.join(', ')}`);
  // The whole list fits at 800 px (no sideways scroll hiding Created, Duration, Device), and each row
  // still says when it was created, how long it ran and on which device; at 1440 px each has its column.
  const listed = (await apiGet(base, '/v1/jobs?limit=50')).jobs;
  const fitsAndSays = async (width) => {
    await page.setViewportSize({width, height: 900});
    await page.waitForSelector('table.jobs tbody tr[data-id]');
    return page.$$eval('table.jobs', ([t], jobs) => ({
      over: t.scrollWidth - t.parentElement.clientWidth,
      heads: [...t.querySelectorAll('thead th')].filter((th) => th.offsetParent).map((th) => th.innerText.trim()),
      missing: jobs.flatMap((j) => {
        const tr = t.querySelector(`tr[data-id="${j.id}"]`);
        if (!tr) return [];
        const shown = tr.innerText;
        const created = tr.querySelector(`[title="${j.created_at}"]`);
        return [[j.device && !shown.includes(j.device), 'device'], [!created || !created.offsetParent || !shown.includes(created.textContent), 'created'],
          [j.started_at && !/\d s\b|\d min\b|\d h\b/.test(shown), 'duration'], [!shown.includes(j.kind), 'kind']]
          .filter(([bad]) => bad).map(([, what]) => `#${j.id} ${what}`);
      })}), listed);
  };
  const narrow = await fitsAndSays(800);
  check(narrow.over <= 0, `jobs list at 800 px is ${narrow.over} px wider than its box: it scrolls sideways`);
  check(!narrow.missing.length, `jobs list at 800 px does not show: ${narrow.missing.join(', ')}`);
  const wide = await fitsAndSays(1440);
  check(['Model', 'Progress', 'Created', 'Duration', 'Device'].every((c) => wide.heads.includes(c)) && !wide.missing.length,
    `jobs list at 1440 px: columns ${wide.heads.join(', ')}; not shown: ${wide.missing.join(', ')}`);
  await shot('jobs-1440.png', {fullPage: false});
  await page.setViewportSize({width: 800, height: 900});
  // Nothing wider than the window at 800 px: wide tables scroll inside their box, long selects
  // (history's configuration) shrink. One page per kind (the newest job of each), history, compare.
  const newest = new Map();
  const jobsNow = (await apiGet(base, '/v1/jobs?limit=1000')).jobs;
  for (const j of jobsNow) if (!newest.has(j.kind) && j.status === 'succeeded') newest.set(j.kind, j.id);
  // compare: runs with and without warm-up steps, so that the table has its widest headers ("Warm-up steps")
  const byLabel = (l) => (jobsNow.find((j) => j.label === l) || {}).id;
  const bench = [byLabel('web test fp32'), byLabel('web test no warm-up'), byLabel('web test fp32+bf16')].filter(Boolean);
  const pages = [...[...newest.values()].map((id) => `#/jobs/${id}`), '#/history', `#/compare?jobs=${bench.join(',')}`, '#/submit?kind=benchmark'];
  for (const hash of pages) {
    await page.goto(`${base}/${hash}`);
    await page.waitForSelector('main h1');
    await page.waitForLoadState('networkidle');
    const over = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    check(over <= 0, `${hash} at 800 px is ${over} px wider than the window`);
    // Screen readers list tables by name: each has a caption (or a label), each header cell a scope.
    const unnamed = await page.$$eval('main table:not(.data)', (ts) => ts.filter((t) => !(t.caption?.textContent.trim() || t.getAttribute('aria-label')))
      .map((t) => t.id || t.className));
    check(!unnamed.length, `${hash}: tables without a caption: ${unnamed.join(', ')}`);
    const noScope = await page.$$eval('main th:not([scope])', (ths) => ths.map((th) => th.textContent));
    check(!noScope.length, `${hash}: header cells without scope: ${noScope.join(', ')}`);
    // A header that wraps does so between words ("Warm-up / steps", not "Warm- / up steps").
    const brokenHeads = await page.$$eval('main thead th', (ths) => ths.flatMap((th) => {
      const out = [];
      const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
      for (let t = walk.nextNode(); t; t = walk.nextNode())
        for (const m of t.data.matchAll(/\S+/g)) {
          const r = document.createRange();
          r.setStart(t, m.index);
          r.setEnd(t, m.index + m[0].length);
          if (new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size > 1) out.push(m[0]);
        }
      return out;
    }));
    check(!brokenHeads.length, `${hash} at 800 px: header words broken across lines: ${brokenHeads.join(', ')}`);
    if (hash.startsWith('#/compare')) {
      const [speedRight, boxRight] = await page.$eval('#compare-table', (t) => [t.querySelector('thead th.speedup').getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right]);
      check(speedRight <= boxRight + 0.5, `compare at 800 px: the speedup column ends at ${speedRight} px, past its box's ${boxRight} px`);
    }
  }
  await page.goto(`${base}/#/history`);
  await page.waitForSelector('#history-table');
  await shot('history-800.png');
  await page.setViewportSize({width: 1280, height: 900});
  log(`at 800 px: ${pages.length} pages no wider than the window`);
}

// lmperfd not answering (every API request refused, as while it restarts):
// the page says so in a banner, keeps what it showed, and recovers on its own
// when the daemon answers again; a page first loaded without it is drawn again.
async function checkUnreachable(base) {
  const before = consoleErrors.length;
  const refuse = (route) => route.abort('connectionrefused');
  await page.goto(`${base}/#/jobs`);
  await page.waitForSelector('table.jobs tbody tr[data-id]');
  await page.route('**/v1/**', refuse);
  await page.waitForSelector('#offline:not([hidden])', {timeout: 15000});
  check(/not answering/.test(await page.textContent('#offline')) && await page.$('table.jobs tbody tr[data-id]'),
    'daemon unreachable: no banner, or the job list was dropped');
  await shot('jobs-unreachable.png');
  await page.unroute('**/v1/**', refuse);
  await page.waitForSelector('#offline', {state: 'hidden', timeout: 10000});
  // A fresh load while the daemon does not answer, then it comes back: header and filters filled in.
  await page.route('**/v1/**', refuse);
  await page.reload();
  await page.waitForSelector('#offline:not([hidden])');
  await page.waitForFunction(() => document.getElementById('sysinfo').textContent === 'daemon unreachable');
  await page.unroute('**/v1/**', refuse);
  await page.waitForSelector('#offline', {state: 'hidden', timeout: 10000});
  await page.waitForFunction(() => document.getElementById('sysinfo').textContent !== 'daemon unreachable' &&
    document.querySelectorAll('select[name="kind"] option').length > 1 && document.querySelector('table.jobs tbody tr[data-id]'));
  // A job page first loaded without the daemon says so, then shows the job.
  const id = (await apiGet(base, '/v1/jobs?limit=1')).jobs[0].id;
  await page.goto(`${base}/#/jobs`);
  await page.waitForSelector('table.jobs tbody tr[data-id]');
  await page.route('**/v1/**', refuse);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.reload(); // a fresh page: no job kept from before
  await page.waitForSelector('#job-unreachable');
  await page.unroute('**/v1/**', refuse);
  await page.waitForSelector('#job-status', {timeout: 10000});
  // the refused requests' own console lines are this check's doing, not the page's
  const refused = consoleErrors.splice(before).filter((e) => !/ERR_CONNECTION_REFUSED|ERR_FAILED/.test(e));
  consoleErrors.push(...refused);
  log('daemon unreachable: banner shown, page kept; recovered when it answered again');
}

async function checkKeyboard(base) {
  await page.goto(base + '/#/jobs');
  await page.reload(); // a fresh load: focus starts at the document
  await page.waitForSelector('table.jobs tbody tr');
  await page.keyboard.press('Tab');
  const first = await page.evaluate(() => document.activeElement && document.activeElement.textContent);
  check(first === 'Skip to content', `first Tab stop is '${first}', expected the skip link`);
  // The Nav links are reachable and activate with Enter.
  for (let i = 0; i < 10; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(() => document.activeElement.getAttribute('href') === '#/compare')) break;
  }
  await page.keyboard.press('Enter');
  await page.waitForURL(/#\/compare/);
  await page.waitForSelector('h1:text("Compare runs")');
}

async function main() {
  if (!lmperfd) { console.error('usage: node test_web.mjs LMPERFD SOURCE_ROOT OUT_DIR'); process.exit(2); }
  const {chromium} = loadPlaywright();
  check(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM)`);
  mkdirSync(outDir, {recursive: true});
  rmSync(join(outDir, 'failure.png'), {force: true});
  await checkFormDefaults();
  const base = await startDaemon();
  log(`lmperfd at ${base}`);
  context = await chromium.launchPersistentContext(join(tmp, 'profile'), {
    executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, acceptDownloads: true,
    viewport: {width: 1280, height: 900}});
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], {origin: base});
  page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleErrors.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${e.message}`));
  // ERR_ABORTED: a poll cut short by the test's own navigation, not a page error.
  page.on('requestfailed', (r) => { if (!r.url().startsWith('blob:') && !/ERR_ABORTED/.test(r.failure()?.errorText || '')) consoleErrors.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`); });
  page.setDefaultTimeout(20000);

  await page.goto(base + '/');
  await page.waitForSelector('h1:text("Jobs")');
  // the list arrives after the heading (GET /v1/jobs): wait for it rather than look once
  check(await page.waitForSelector('text=No jobs yet', {timeout: 10000}).then(() => true, () => false),
    'empty job list does not say so');

  await submitNumerics(base);
  const formJob = await submitBenchmark(base);
  // A second job from the API: fp32 only, same shapes, so runs compare across jobs.
  const apiJob = (await apiPost(base, {kind: 'benchmark', label: 'web test fp32', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS, batch_size: 2, warmup_steps: 2, measure_steps: 3})).id;
  await waitJob(base, apiJob);
  await checkOptimizerInBackward(base, apiJob);
  await checkBenchmarkPage(base, formJob);
  await checkColumnFormatters();
  await checkModeSweep(base);
  await checkWideChartTable(base);
  await checkBenchmarkAllFailed(base);
  await checkCompare(base, formJob, apiJob);
  await checkHostBusy(base, apiJob);
  await checkCompareModes(base);
  await checkCompareSpecFields(base);
  await checkHistoryWarmup(base, apiJob);
  await checkOddUrls(base, formJob);
  await checkCancelling(base);
  await checkRunningJobFits(base);
  await page.goto(base + '/#/history');
  await page.waitForSelector('#history-table tbody tr');
  await checkTableDecimals('#history-table', 'history table');
  await shot('history.png');
  await checkHistoryOneRun();
  await checkAllreduce(base);
  await checkMemory(base);
  const memoryOom = await checkMemoryOom(base);
  if (memoryOom) await checkCompareFailed(base, memoryOom);
  await checkAttention(base);
  await checkProfileRefused(base);
  await checkOomMarks();
  await checkAttentionAllOom(base);
  await checkGpuFixture();
  await checkBigChart(base);
  await checkNarrowJobs(base);
  await checkUnreachable(base);
  await checkKeyboard(base);
  check(consoleErrors.length === 0, `the page logged errors:\n  ${consoleErrors.join('\n  ')}`);
}

// A run with the optimizer in backward beside the same run without: the compare
// page shows the switch as a column that differs, and the job baseline still
// finds the run of the same shape.
async function checkOptimizerInBackward(base, apiJob) {
  const oibJob = (await apiPost(base, {kind: 'benchmark', label: 'web test oib', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS[0], batch_size: 2, warmup_steps: 1, measure_steps: 2, optimizer_in_backward: true})).id;
  await waitJob(base, oibJob);
  await page.goto(`${base}/#/jobs/${oibJob}`);
  await page.waitForSelector('#bench-protocol');
  const protocol = await page.textContent('#bench-protocol'), stepsDesc = await page.textContent('figure.chart .chart-desc');
  check(/over 2 measured steps after 1 warm-up step;/.test(protocol) && /^1 warm-up step \(square\) is excluded/.test(stepsDesc),
    `one warm-up step in words: '${protocol}', '${stepsDesc}'`);
  await page.goto(`${base}/#/compare?runs=${apiJob}:0,${oibJob}:0&baseline=job:${apiJob}`);
  await page.waitForSelector('#compare-table tbody tr');
  const rows = await page.$$eval('#compare-table tbody tr', (trs) => trs.map((tr) => ({
    run: tr.dataset.run,
    oib: tr.querySelector('td[data-key=optimizer_in_backward]')?.textContent,
    warmup: tr.querySelector('td[data-key=warmup_steps]')?.textContent,
    speedup: tr.querySelector('td.speedup').dataset.value})));
  const mine = rows.find((r) => r.run === `${oibJob}:0`);
  check(rows.length === 2 && mine && mine.oib === 'yes' && rows.find((r) => r.run === `${apiJob}:0`)?.oib === 'no',
    `compare: optimizer-in-backward column ${JSON.stringify(rows)}`);
  // the warm-up steps differ too (1 vs 2): a column, as the seeds' warm-up experiment needs
  check(mine && mine.warmup === '1' && rows.find((r) => r.run === `${apiJob}:0`)?.warmup === '2',
    `compare: warm-up steps column ${JSON.stringify(rows)}`);
  check(mine && Number(mine.speedup) > 0, `compare: no job-baseline speedup for the optimizer-in-backward run ${JSON.stringify(mine)}`);
  log(`compare page: optimizer in backward shown as a differing column, baseline found`);
}

// Runs that differ only in vocab size, measured steps or seed: the compare page
// shows each such field as a highlighted column with the API's values, and the
// CSV and Markdown exports carry it.
async function checkCompareSpecFields(base) {
  const one = {kind: 'benchmark', model: SHAPE, vocab_size: 256, context_length: CONTEXTS[0], batch_size: 1,
    warmup_steps: 1, measure_steps: 2, seed: 0};
  const ids = [];
  for (const diff of [{}, {vocab_size: 512}, {measure_steps: 3}, {seed: 7}])
    ids.push((await apiPost(base, {...one, ...diff, label: `web test spec fields ${JSON.stringify(diff)}`})).id);
  const runs = [];
  for (const id of ids) runs.push(...(await waitJob(base, id)).runs.map((r) => ({...r, job_id: id})));
  await page.goto(`${base}/#/compare?runs=${runs.map((r) => `${r.job_id}:${r.index}`).join(',')}`);
  await page.waitForSelector('#compare-table tbody tr');
  const fields = ['vocab_size', 'measure_steps', 'seed'];
  const rows = await page.$$eval('#compare-table tbody tr', (trs, keys) => trs.map((tr) => ({run: tr.dataset.run,
    ...Object.fromEntries(keys.map((k) => {
      const td = tr.querySelector(`td[data-key=${k}]`);
      return [k, td ? {text: td.textContent, differs: td.classList.contains('differs')} : null];
    }))})), fields);
  for (const row of rows) {
    const r = runs.find((x) => `${x.job_id}:${x.index}` === row.run);
    for (const k of fields)
      check(row[k] && row[k].text === String(r[k]) && row[k].differs, `compare ${row.run}: ${k} column ${JSON.stringify(row[k])}, API ${r[k]}`);
  }
  const [csvDl] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export CSV")')]);
  const csv = readFileSync(await csvDl.path(), 'utf8').trim().split('\n').map((l) => l.split(','));
  for (const line of csv.slice(1)) {
    const r = runs.find((x) => x.job_id === Number(line[0]) && x.index === Number(line[1]));
    for (const k of fields)
      check(csv[0].includes(k) && line[csv[0].indexOf(k)] === String(r[k]), `CSV ${line[0]}:${line[1]}: ${k} '${line[csv[0].indexOf(k)]}', API ${r[k]}`);
  }
  const [mdDl] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export Markdown")')]);
  const mdHead = readFileSync(await mdDl.path(), 'utf8').split('\n')[0];
  check(['Vocab', 'Measured steps', 'Seed'].every((c) => mdHead.includes(`| ${c} `)), `Markdown head lacks the differing fields: ${mdHead}`);
  // The speedup, what the page is for, is in view without scrolling the table sideways (1280 px, three differing columns).
  const [speedRight, boxRight] = await page.$eval('#compare-table', (t) => [t.querySelector('thead th.speedup').getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right]);
  check(speedRight <= boxRight + 0.5, `compare table: the speedup column ends at ${speedRight} px, past its box's ${boxRight} px`);
  await shot('compare-spec-fields.png');
  log(`compare page: vocab size, measured steps and seed shown as differing columns and exported`);
}

// A sweep over modes: the per-step chart's run picker tells the forward run
// from the train-step run of the same shape.
async function checkModeSweep(base) {
  const id = (await apiPost(base, {kind: 'benchmark', label: 'web test modes', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS[0], batch_size: 2, warmup_steps: 1, measure_steps: 1, mode: ['forward', 'train_step']})).id;
  const job = await waitJob(base, id);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.waitForSelector('#step-run option', {state: 'attached'});
  const options = await page.$$eval('#step-run option', (os) => os.map((o) => o.textContent));
  check(options.length === job.runs.length && new Set(options).size === options.length &&
    job.runs.every((r) => options.some((o) => o.startsWith(`run ${r.index}:`) && o.endsWith(r.mode))),
    `per-step run picker does not tell the modes apart: ${JSON.stringify(options)}`);
  // The legend names what is drawn: a forward run's one phase is its whole step, one line.
  for (const r of job.runs) {
    await page.selectOption('#step-run', String(r.index));
    const chart = await page.$eval('section.chart-box:has(#step-run) figure', (f) => ({lines: f.querySelectorAll('path.line').length,
      legend: [...f.querySelectorAll('.legend li')].map((li) => li.textContent)}));
    const want = r.mode === 'forward' ? ['forward (the whole step)'] : ['forward', 'backward', 'optimizer', 'whole step'];
    check(chart.lines === want.length && JSON.stringify(chart.legend) === JSON.stringify([...want, 'warm-up step']),
      `per-step chart of run ${r.index} (${r.mode}): ${chart.lines} lines, legend ${JSON.stringify(chart.legend)}, expected ${JSON.stringify(want)}`);
  }
  log(`benchmark job ${id}: the run picker names each run's mode; each per-step legend names the lines drawn`);
}

// A precision sweep over two modes, compared from its job page: a speedup
// compares like with like (bf16 train step against fp32 train step, never
// against the fp32 forward that is run 0), a row with no such run reads "—",
// and the CSV export says the same.
async function checkCompareModes(base) {
  const id = (await apiPost(base, {kind: 'benchmark', label: 'web test precision × mode', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS[0], batch_size: 2, warmup_steps: 1, measure_steps: 2, precision: ['fp32', 'bf16'], mode: ['forward', 'train_step']})).id;
  const job = await waitJob(base, id);
  await page.goto(`${base}/#/jobs/${id}`);
  await page.click('a:text("Compare these runs")');
  await page.waitForSelector('#compare-table tbody tr');
  const speedups = () => page.$$eval('#compare-table tbody tr', (trs) => Object.fromEntries(trs.map((tr) => [tr.dataset.run,
    {value: tr.querySelector('td.speedup').dataset.value, text: tr.querySelector('td.speedup').textContent}])));
  const expect = (runs, phase) => Object.fromEntries(runs.map((r) => {
    const b = runs.find((x) => x.precision === 'fp32' && x.mode === r.mode);
    return [`${id}:${r.index}`, b && r.stats[phase] && b.stats[phase] ? b.stats[phase].mean_ms / r.stats[phase].mean_ms : null];
  }));
  let got = await speedups();
  for (const [k, want] of Object.entries(expect(job.runs, 'total'))) {
    check(want !== null && Math.abs(Number(got[k].value) - want) < 1e-9 * want, `compare ${k}: speedup ${got[k].value}, expected ${want} (same mode's fp32)`);
    checkShown(got[k].text, want, `compare ${k} speedup`);
  }
  const legend = await page.textContent('#compare-baseline');
  check(/precision fp32/.test(legend) && /mode/.test(legend), `the baseline legend does not say what it compares: '${legend}'`);
  // The backward: forward rows have none, so no speedup.
  await page.selectOption('#phase', 'backward');
  got = await speedups();
  for (const [k, want] of Object.entries(expect(job.runs, 'backward')))
    check(want === null ? got[k].value === '' && got[k].text === '—' : Math.abs(Number(got[k].value) - want) < 1e-9 * want,
      `compare ${k} (backward): speedup '${got[k].text}', expected ${want}`);
  await page.selectOption('#phase', 'total');
  // Without the fp32 train step, the bf16 train step has nothing to compare with.
  const fp32Train = job.runs.find((r) => r.precision === 'fp32' && r.mode === 'train_step');
  const bf16Train = job.runs.find((r) => r.precision === 'bf16' && r.mode === 'train_step');
  await page.click(`button[aria-label="remove run ${id}:${fp32Train.index}"]`);
  got = await speedups();
  check(got[`${id}:${bf16Train.index}`].text === '—' && got[`${id}:${bf16Train.index}`].value === '',
    `bf16 train step without an fp32 train step: speedup '${got[`${id}:${bf16Train.index}`].text}', expected —`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('button:text("Export CSV")')]);
  const csv = readFileSync(await download.path(), 'utf8').trim().split('\n').map((l) => l.split(','));
  const col = csv[0].indexOf('speedup_total');
  for (const line of csv.slice(1))
    check(line[col] === (got[`${line[0]}:${line[1]}`].value), `CSV speedup of ${line[0]}:${line[1]} is '${line[col]}', the page's '${got[`${line[0]}:${line[1]}`].value}'`);
  await shot('compare-modes.png');
  log(`compare page: job ${id}'s speedups are per mode, '—' without a same-mode baseline`);
}

// History keeps warm-up counts apart: a run without warm-up is not the same
// configuration as the two jobs' runs with 2 warm-up steps (the seeds compare
// exactly these).
async function checkHistoryWarmup(base, apiJob) {
  const id = (await apiPost(base, {kind: 'benchmark', label: 'web test no warm-up', model: SHAPE, vocab_size: 256,
    context_length: CONTEXTS[0], batch_size: 2, warmup_steps: 0, measure_steps: 3})).id;
  await waitJob(base, id);
  for (const [job, warmup] of [[id, 0], [apiJob, 2]]) {
    await page.goto(`${base}/#/jobs/${job}`);
    await page.click('#bench-summary tbody tr[data-run="0"] a:text("history")');
    await page.waitForSelector('#history-table tbody tr');
    const jobsShown = await page.$$eval('#history-table tbody tr a', (as) => as.map((a) => Number(a.textContent.match(/^#(\d+)\./)[1])));
    for (const j of jobsShown)
      check((await apiGet(base, `/v1/jobs/${j}`)).runs.every((r) => r.warmup_steps === warmup),
        `history of job ${job}'s run 0 (warm-up ${warmup}) lists job ${j}'s run: ${JSON.stringify(jobsShown)}`);
    check(jobsShown.includes(job), `history of job ${job}'s run 0 does not list it: ${JSON.stringify(jobsShown)}`);
    check((await page.$eval('#config', (s) => s.selectedOptions[0].textContent)).includes(`warm-up ${warmup}`), 'the configuration does not name its warm-up');
  }
  log(`history: the run without warm-up (job ${id}) is a configuration of its own`);
}

// A running job whose cancel was asked for reads "cancelling…" (the API's
// cancel_requested_at), not "running", and offers no second Cancel; the
// job page's Cancel button asks and the API notes it.
async function checkCancelling(base) {
  const badge = await page.evaluate(async () => {
    const {statusBadge} = await import('/pages/jobs.js');
    const job = {id: 1, status: 'running', cancel_requested_at: '2026-01-01T00:00:00.000Z'};
    return [statusBadge(job.status, job).textContent, statusBadge('running', {...job, cancel_requested_at: null}).textContent];
  });
  check(badge[0] === 'cancelling…' && badge[1] === 'running', `status badges with and without a cancel asked for: ${JSON.stringify(badge)}`);
  const id = (await apiPost(base, {kind: 'numerics', count: 3000000000, label: 'web test cancel'})).id;
  for (let i = 0; i < 200 && (await apiGet(base, `/v1/jobs/${id}`)).status !== 'running'; i++) await new Promise((r) => setTimeout(r, 50));
  await page.goto(`${base}/#/jobs/${id}`);
  await page.click('button:text("Cancel job")');
  await page.waitForFunction(() => /cancelling…|cancelled/.test(document.querySelector('#job-status')?.textContent || ''));
  const job = await apiGet(base, `/v1/jobs/${id}`);
  check(typeof job.cancel_requested_at === 'string', `a job cancelled from its page has no cancel_requested_at: ${JSON.stringify(job)}`);
  if (job.status === 'running')
    check(await page.isVisible('#job-cancelling') && !(await page.isVisible('button:text("Cancel job")')), 'a cancelling job does not say so, or offers Cancel again');
  await waitJob(base, id, {mustSucceed: false});
  log(`job ${id}: cancel asked from its page, shown as cancelling until it stopped`);
}

// A running job's progress message ("tiny, context 64, batch 2, fp32, train_step, 1000 warm-up")
// wraps under its bar: at 1440, 1280 and 800 px the job list does not scroll sideways and the
// row's Cancel button is in view (it was pushed out of the box by the unbroken message).
async function checkRunningJobFits(base) {
  const id = (await apiPost(base, {kind: 'benchmark', model: 'tiny', context_length: 64, batch_size: 2,
    warmup_steps: 1000, measure_steps: 1000, label: 'web test progress'})).id;
  try {
    await runningJobFits(base, id);
  } finally { /* a failed check leaves no 1000-step job for the daemon's SIGTERM drain to wait on */
    await fetch(`${base}/v1/jobs/${id}`, {method: 'DELETE'}).catch(() => {});
  }
  await waitJob(base, id, {mustSucceed: false});
  log(`job ${id} running: the job list fits at 1440, 1280 and 800 px with its Cancel button in view`);
}

async function runningJobFits(base, id) {
  let job;
  for (let i = 0; i < 400; i++) {
    job = await apiGet(base, `/v1/jobs/${id}`);
    if (job.status === 'running' && job.progress && job.progress.message) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  check(job.status === 'running' && job.progress.message && job.progress.message.length > 40,
    `job ${id} did not run with a long progress message: ${JSON.stringify(job.progress)}`);
  for (const width of [1440, 1280, 800]) {
    await page.setViewportSize({width, height: 900});
    await page.goto(base + '/#/jobs');
    await page.waitForSelector(`table.jobs tr[data-id="${id}"] button`);
    const fit = await page.$eval('table.jobs', (t, jobId) => {
      const box = t.parentElement.getBoundingClientRect();
      const button = t.querySelector(`tr[data-id="${jobId}"] button`).getBoundingClientRect();
      return {over: t.scrollWidth - t.parentElement.clientWidth, buttonRight: button.right, boxRight: box.right};
    }, id);
    check(fit.over <= 0 && fit.buttonRight <= fit.boxRight + 0.5,
      `jobs list at ${width} px with job ${id} running: ${fit.over} px wider than its box, Cancel ends at ${fit.buttonRight} of ${fit.boxRight}`);
  }
  await shot('jobs-running-800.png', {fullPage: false});
  await page.setViewportSize({width: 1280, height: 900}); /* the context's size, which later checks assume */
}

// A configuration of one run: the chart's time axis names its time (it had no tick at all).
async function checkHistoryOneRun() {
  const one = await page.$$eval('#config option', (os) => (os.find((o) => / \(1 run\)$/.test(o.textContent)) || {}).value);
  check(one, 'history: no configuration of one run to pick');
  await page.selectOption('#config', one);
  await page.waitForFunction(() => / \(1 run\)$/.test(document.querySelector('#config').selectedOptions[0].textContent) &&
    document.querySelectorAll('#history-table tbody tr').length === 1);
  const ticks = await page.$$eval('figure.chart svg text.tick.x', (ts) => ts.map((t) => t.textContent));
  check(ticks.length === 1 && /^\d\d:\d\d/.test(ticks[0]), `history of one run: time axis ticks ${JSON.stringify(ticks)}, expected its time`);
  log(`history of one run: its time axis reads ${ticks[0]}`);
  // A forward-mode configuration: one series, the forward pass being the whole step (its legend named a
  // "forward" line hidden under the "whole step" one, the same times).
  const fwd = await page.$$eval('#config option', (os) => (os.find((o) => / · forward · /.test(o.textContent)) || {}).value);
  check(fwd, 'history: no forward-mode configuration to pick');
  await page.selectOption('#config', fwd);
  await page.waitForFunction(() => / · forward · /.test(document.querySelector('figure.chart figcaption')?.textContent || ''));
  const legend = await page.$$eval('figure.chart .legend li', (lis) => lis.map((li) => li.textContent));
  check(JSON.stringify(legend) === '["forward (the whole step)"]', `history of a forward-mode configuration: legend ${JSON.stringify(legend)}`);
}

// Hand-edited URLs: a phase the compare page does not know falls back to the
// whole step, and a kind named like an Object.prototype member is an unknown
// kind, not a crash.
async function checkOddUrls(base, job) {
  await page.goto(`${base}/#/compare?jobs=${job}&phase=x`);
  await page.waitForSelector('#compare-table tbody tr');
  check(!(await page.isVisible('h1:text("Something went wrong")')), 'compare with an unknown phase crashed');
  for (const kind of ['constructor', 'toString']) {
    await page.goto(`${base}/#/submit?kind=${kind}`);
    await page.waitForSelector('#spec-json');
    check(!(await page.isVisible('h1:text("Something went wrong")')), `submit?kind=${kind} crashed`);
  }
  log('odd compare and submit URLs render');
}

let code = 0;
try {
  await main();
  log(`PASS; screenshots: ${screenshots.join(', ')}`);
} catch (e) {
  code = 1;
  console.error(`FAIL: ${e.isCheck ? e.message : e.stack || e}`);
  if (consoleErrors.length) console.error(`page errors:\n  ${consoleErrors.join('\n  ')}`);
  if (page) {
    try { await page.screenshot({path: join(outDir, 'failure.png'), fullPage: true}); console.error(`screenshot: ${join(outDir, 'failure.png')}`); } catch { /* browser gone */ }
  }
} finally {
  if (context) await context.close().catch(() => {});
  if (daemon) { const d = daemon; daemon = null; d.kill('SIGTERM'); }
  if (fixtureDaemon) fixtureDaemon.kill('SIGTERM');
  if (tmp) rmSync(tmp, {recursive: true, force: true});
}
process.exit(code);
