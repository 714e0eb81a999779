// SVG charts drawn by hand: line/scatter (linear or log axes, error bars,
// flagged points) and grouped bars. One <path> per series, markers only when
// few, so thousands of points stay fast; hover or focus shows the nearest
// point; every chart has a text alternative.
import {h, s} from './dom.js';

const W = 720, H = 340;
const M = {top: 16, right: 20, bottom: 52, left: 72};
const MAX_MARKERS = 400; // per series; above this only the line is drawn
let clipCount = 0;    // unique clipPath ids per page

// Nice linear ticks within [lo, hi]; `cover`: the first tick at or below lo
// and the last at or above hi, so an axis from the first to the last tick
// holds every value.
function linearTicks(lo, hi, count = 6, cover = false) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((st) => st >= raw) || raw;
  const first = (cover ? Math.floor(lo / step + 1e-9) : Math.ceil(lo / step)) * step;
  const last = cover ? Math.ceil(hi / step - 1e-9) * step : hi;
  const ticks = [];
  for (let v = first; v <= last + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

// Tick labels: a tick is a round number, so the zeros ending its fraction
// are dropped ("25.00" → "25", "0.50×" → "0.5×"); hover and tables keep the format's digits.
function tickLabels(ticks, f) {
  return ticks.map((t) => f(t).replace(/(\.\d*?)0+(?!\d)/, '$1').replace(/\.(?!\d)/, ''));
}

// Log ticks: powers of `base` in range; for base 10 over a short range, 1-2-5.
function logTicks(lo, hi, base) {
  const ticks = [];
  const a = Math.floor(Math.log(lo) / Math.log(base)), b = Math.ceil(Math.log(hi) / Math.log(base));
  for (let e = a; e <= b; e++) {
    const v = base ** e;
    const subs = base === 10 && b - a <= 2 ? [1, 2, 5] : [1];
    for (const m of subs) if (v * m >= lo * 0.999 && v * m <= hi * 1.001) ticks.push(v * m);
  }
  return ticks.length >= 2 ? ticks : [lo, hi];
}

function scale(domain, range, log) {
  let [d0, d1] = domain;
  const f = log ? Math.log : (x) => x;
  if (f(d0) === f(d1)) { d0 = log ? d0 / 2 : d0 - 1; d1 = log ? d1 * 2 : d1 + 1; }
  const a = f(d0), b = f(d1);
  const fn = (x) => range[0] + ((f(x) - a) / (b - a)) * (range[1] - range[0]);
  fn.domain = [d0, d1];
  return fn;
}

// Local time labels as fine as the span needs: seconds, minutes, or dates.
function timeFormat(points) {
  let lo = Infinity, hi = -Infinity;
  for (const p of points) { lo = Math.min(lo, p.x); hi = Math.max(hi, p.x); }
  const span = hi - lo;
  const pad = (n) => String(n).padStart(2, '0');
  return (v) => {
    const d = new Date(v);
    const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    if (span < 3600e3) return `${hm}:${pad(d.getSeconds())}`;
    if (span < 86400e3) return hm;
    return `${d.getFullYear() !== new Date().getFullYear() ? d.getFullYear() + '-' : ''}${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
  };
}

const defaultFmt = (v) => (Math.abs(v) >= 1000 ? v.toLocaleString('en-US') : String(+v.toPrecision(4)));

// A <figure> with a title, the SVG, a legend and a <details> data table (in its own sideways
// scroll box: a table of many series is wider than the page).
let descIds = 0;
function figure(title, svg, legend, table, desc) {
  const descId = desc ? `chart-desc-${++descIds}` : null;
  if (descId) svg.setAttribute('aria-describedby', descId);
  return h('figure', {class: 'chart'},
    h('figcaption', null, title),
    svg,
    legend,
    desc ? h('p', {class: 'chart-desc', id: descId}, desc) : null,
    table ? h('details', {class: 'chart-data'}, h('summary', null, 'Data as a table'), h('div', {class: 'scroll'}, table)) : null);
}

function legendOf(names, always = false) {
  if (names.length < (always ? 1 : 2)) return null;
  return h('ul', {class: 'legend'}, names.map((n, i) =>
    h('li', null, h('span', {class: `swatch c${i % 8}`, 'aria-hidden': 'true'}), n)));
}

// opts: {title, series:[{name, points:[{x, y, err?, flag?, label?}], marks?:[{x, label?}]}], xLabel, yLabel,
//        logX, logY, xBase (2|10), xFormat, yFormat, xTime, flagLabel, markLabel, marksOnlyText, desc, band?:[x0,x1,label],
//        legendAlways (a legend for one series too)}
// marks: x values with no y (e.g. out of memory), drawn as ✕ along the top edge;
// marks and no value at all: the ✕ row and marksOnlyText over an empty plot.
export function lineChart(opts) {
  const series = opts.series.filter((sr) => sr.points.length || (sr.marks && sr.marks.length));
  const all = series.flatMap((sr) => sr.points);
  const title = opts.title;
  if (!series.length) return figure(title, h('p', {class: 'empty'}, 'No data to plot.'));
  // Every x has a mark and none a value (e.g. every point ran out of memory):
  // the ✕ row over an empty plot with no y ticks, and a line saying so.
  const marksOnly = !all.length;
  const xFmt = opts.xFormat || (opts.xTime ? timeFormat(all) : defaultFmt);
  const yFmt = opts.yFormat || defaultFmt;
  const okX = (p) => !opts.logX || p.x > 0, okY = (p) => !opts.logY || p.y > 0;
  const pts = all.filter((p) => okX(p) && okY(p));
  if (!pts.length && !marksOnly) return figure(title, h('p', {class: 'empty'}, 'Nothing to plot on a log axis (values ≤ 0).'));
  // min/max by loop: spreading 10⁵ points into Math.min overflows the stack.
  let xLo = Infinity, xHi = -Infinity, yLo = Infinity, yHi = -Infinity;
  for (const p of pts) {
    xLo = Math.min(xLo, p.x); xHi = Math.max(xHi, p.x);
    yLo = Math.min(yLo, p.y); yHi = Math.max(yHi, p.y + (p.err || 0));
  }
  if (marksOnly) { yLo = opts.logY ? 1 : 0; yHi = opts.logY ? 10 : 1; }
  const marksOf = (sr) => (sr.marks || []).filter(okX);
  for (const sr of series) for (const m of marksOf(sr)) { xLo = Math.min(xLo, m.x); xHi = Math.max(xHi, m.x); }
  // Headroom for the ✕ row along the top edge.
  if (series.some((sr) => marksOf(sr).length)) yHi = opts.logY ? yHi * 3 : yHi + (yHi - Math.min(0, yLo)) * 0.12;
  // Times are positive: a linear axis starts at 0 and error bars are clipped there.
  if (!opts.logY) yLo = Math.min(0, yLo);
  else { yLo /= 1.5; yHi *= 1.3; }
  const yTicks = marksOnly ? [] : opts.logY ? logTicks(yLo, yHi, 10) : linearTicks(yLo, yHi, 6, true);
  if (!opts.logY && !marksOnly) { yLo = Math.min(yLo, yTicks[0]); yHi = Math.max(yHi, yTicks[yTicks.length - 1]); }
  // Few distinct x values (context lengths): tick exactly those.
  const distinctX = [...new Set([...pts, ...series.flatMap(marksOf)].map((p) => p.x))].sort((a, b) => a - b);
  // one time (a history of one run): its own tick; linearTicks' ±1 ms around it rounds away (12 digits of epoch ms)
  const xTicks = opts.xTime ? (xLo === xHi ? [xLo] : linearTicks(xLo, xHi, 5))
    : opts.categoricalX !== false && distinctX.length <= 12 && !opts.integerX ? distinctX
      : opts.logX ? logTicks(xLo, xHi, opts.xBase || 10) : linearTicks(xLo, xHi, 8);
  const xPad = opts.logX ? 0 : (xHi - xLo || 1) * 0.04;
  const xs = scale(opts.logX ? [xLo / 1.08, xHi * 1.08] : [xLo - xPad, xHi + xPad], [M.left, W - M.right], opts.logX);
  const ys = scale([yLo, yHi], [H - M.bottom, M.top], opts.logY);

  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, class: 'plot', role: 'img', 'aria-label': opts.ariaLabel || title});
  const clipId = `clip-${++clipCount}`;
  svg.append(s('defs', null, s('clipPath', {id: clipId},
    s('rect', {x: M.left, y: M.top - 6, width: W - M.left - M.right + 6, height: H - M.top - M.bottom + 6}))));
  if (opts.band) {
    const [b0, b1, label] = opts.band;
    const x0 = Math.max(M.left, xs(b0)), x1 = Math.min(W - M.right, xs(b1));
    svg.append(s('rect', {class: 'band', x: Math.min(x0, x1), y: M.top, width: Math.abs(x1 - x0), height: H - M.top - M.bottom}),
      s('text', {class: 'band-label', x: (x0 + x1) / 2, y: M.top + 12}, label));
  }
  if (marksOnly)
    svg.append(s('text', {class: 'band-label marks-only', x: (M.left + W - M.right) / 2, y: (M.top + H - M.bottom) / 2},
      opts.marksOnlyText || `every point: ${opts.markLabel || 'no value'}`));
  const grid = s('g', {class: 'grid'});
  const yLabels = tickLabels(yTicks, yFmt), xLabels = tickLabels(xTicks, xFmt);
  yTicks.forEach((t, i) => {
    const y = ys(t);
    if (y < M.top - 1 || y > H - M.bottom + 1) return;
    grid.append(s('line', {x1: M.left, x2: W - M.right, y1: y, y2: y}),
      s('text', {x: M.left - 6, y: y + 4, class: 'tick y'}, yLabels[i]));
  });
  xTicks.forEach((t, i) => {
    const x = xs(t);
    if (x < M.left - 1 || x > W - M.right + 1) return;
    grid.append(s('line', {x1: x, x2: x, y1: M.top, y2: H - M.bottom, class: 'v'}),
      s('text', {x, y: H - M.bottom + 16, class: 'tick x'}, xLabels[i]));
  });
  svg.append(grid);
  svg.append(
    s('line', {class: 'axis', x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom}),
    s('line', {class: 'axis', x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom}),
    s('text', {class: 'axis-label', x: (M.left + W - M.right) / 2, y: H - 10}, opts.xLabel + (opts.logX ? ' (log)' : '')),
    s('text', {class: 'axis-label', transform: `translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)`}, opts.yLabel + (opts.logY ? ' (log)' : '')));

  const placed = [];
  series.forEach((sr, i) => {
    const g = s('g', {class: `series c${i % 8}`, 'clip-path': `url(#${clipId})`});
    const p = sr.points.filter((q) => okX(q) && okY(q)).map((q) => ({...q, px: xs(q.x), py: ys(q.y), series: sr.name}));
    if (!opts.noLine && p.length > 1) {
      let d = '';
      p.forEach((q, j) => { d += `${j ? 'L' : 'M'}${q.px.toFixed(1)},${q.py.toFixed(1)}`; });
      g.append(s('path', {d, class: 'line'}));
    }
    if (p.length <= MAX_MARKERS) {
      for (const q of p) {
        if (q.err) {
          const lo = ys(Math.max(opts.logY ? q.y / 10 : -Infinity, q.y - q.err)), hi = ys(q.y + q.err);
          g.append(s('line', {class: 'err', x1: q.px, x2: q.px, y1: lo, y2: hi}));
        }
        g.append(q.flag
          ? s('rect', {class: 'marker flag', x: q.px - 4, y: q.py - 4, width: 8, height: 8})
          : s('circle', {class: 'marker', cx: q.px, cy: q.py, r: 3.5}));
      }
    }
    placed.push(...p);
    svg.append(g);
    const ms = marksOf(sr);
    if (ms.length) {
      // Outside the clip path: the ✕ sits on the top edge of the plot.
      const mg = s('g', {class: `series marks c${i % 8}`});
      ms.forEach((m) => {
        const px = xs(m.x), py = M.top + 5 + (i % 3) * 4;
        mg.append(s('path', {class: 'marker mark', d: `M${px - 4},${py - 4}L${px + 4},${py + 4}M${px - 4},${py + 4}L${px + 4},${py - 4}`,
          'data-x': m.x, 'data-series': sr.name}));
        placed.push({x: m.x, px, py, series: sr.name, mark: true,
          label: m.label || `${sr.name}: ${xFmt(m.x)} → ${opts.markLabel || 'no value'}`});
      });
      svg.append(mg);
    }
  });
  attachHover(svg, placed, (q) => q.label || `${q.series}: ${xFmt(q.x)} → ${yFmt(q.y)}${q.err ? ' ± ' + yFmt(q.err) : ''}${q.flag ? ' (' + (opts.flagLabel || 'flagged') + ')' : ''}`);

  const names = series.map((sr) => sr.name);
  const hasMarks = series.some((sr) => marksOf(sr).length);
  const legend = legendOf(names, hasMarks || opts.legendAlways);
  if (legend && all.some((p) => p.flag))
    legend.append(h('li', null, h('span', {class: 'swatch flag', 'aria-hidden': 'true'}), opts.flagLabel || 'flagged'));
  if (legend && hasMarks)
    legend.append(h('li', {class: 'mark-key'}, h('span', {class: 'swatch mark', 'aria-hidden': 'true'}, '✕'), `${opts.markLabel || 'no value'} (top edge)`));
  const table = dataTable([opts.xLabel, ...names], series, xFmt, yFmt, opts.markLabel);
  return figure(title, svg, legend, table, opts.desc);
}

// Tooltip on the point nearest the pointer; arrow keys walk points when focused.
function attachHover(svg, placed, text) {
  if (!placed.length) return;
  svg.setAttribute('tabindex', '0');
  const tip = s('g', {class: 'tip', visibility: 'hidden'});
  const ring = s('circle', {r: 6, class: 'tip-ring'});
  const bg = s('rect', {rx: 3, class: 'tip-bg'});
  const label = s('text', {class: 'tip-text'});
  tip.append(ring, bg, label);
  svg.append(tip);
  let current = -1;
  const show = (i) => {
    current = i;
    const q = placed[i];
    ring.setAttribute('cx', q.px);
    ring.setAttribute('cy', q.py);
    label.textContent = text(q);
    const wText = Math.min(W - 8, 7 * label.textContent.length + 10);
    let tx = q.px + 10, ty = q.py - 28;
    if (tx + wText > W) tx = q.px - 10 - wText;
    if (ty < 2) ty = q.py + 10;
    bg.setAttribute('x', tx); bg.setAttribute('y', ty); bg.setAttribute('width', wText); bg.setAttribute('height', 20);
    label.setAttribute('x', tx + 5); label.setAttribute('y', ty + 14);
    tip.setAttribute('visibility', 'visible');
  };
  const hide = () => tip.setAttribute('visibility', 'hidden');
  svg.addEventListener('pointermove', (ev) => {
    const r = svg.getBoundingClientRect();
    const x = ((ev.clientX - r.left) / r.width) * W, y = ((ev.clientY - r.top) / r.height) * H;
    let best = -1, bd = Infinity;
    for (let i = 0; i < placed.length; i++) {
      const d = (placed[i].px - x) ** 2 + ((placed[i].py - y) ** 2) / 4;
      if (d < bd) { bd = d; best = i; }
    }
    if (best >= 0 && bd < 60 ** 2) show(best); else hide();
  });
  svg.addEventListener('pointerleave', hide);
  svg.addEventListener('blur', hide);
  svg.addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
    ev.preventDefault();
    show(((current < 0 ? -1 : current) + (ev.key === 'ArrowRight' ? 1 : placed.length - 1)) % placed.length);
  });
}

function dataTable(headers, series, xFmt, yFmt, markLabel = 'no value') {
  const xsAll = [...new Set(series.flatMap((sr) => [...sr.points, ...(sr.marks || [])].map((p) => p.x)))].sort((a, b) => a - b);
  if (xsAll.length > 500) return null; // the chart is the view for big data
  const maps = series.map((sr) => new Map([...(sr.marks || []).map((m) => [m.x, {mark: true}]), ...sr.points.map((p) => [p.x, p])]));
  return h('table', {class: 'data'},
    h('thead', null, h('tr', null, headers.map((c, i) => h('th', {scope: 'col', class: i ? 'num' : ''}, c)))),
    h('tbody', null, xsAll.map((x) => h('tr', null, h('th', {scope: 'row'}, xFmt(x)),
      maps.map((m) => {
        const p = m.get(x);
        if (p && p.mark) return h('td', {class: 'num'}, markLabel);
        return h('td', {class: 'num'}, p ? yFmt(p.y) + (p.err ? ' ± ' + yFmt(p.err) : '') + (p.flag ? ' *' : '') : '');
      })))));
}

// opts: {title, groups:[{label, bars:[{name, value, title?}]}], yLabel, reference?: number, yFormat, desc}
export function barChart(opts) {
  const groups = opts.groups.filter((g) => g.bars.length);
  if (!groups.length) return figure(opts.title, h('p', {class: 'empty'}, opts.emptyText || 'No data to plot.'));
  const names = [...new Set(groups.flatMap((g) => g.bars.map((b) => b.name)))];
  const yFmt = opts.yFormat || defaultFmt;
  const vals = groups.flatMap((g) => g.bars.map((b) => b.value)).concat(opts.reference ?? 0, 0);
  const yTicks = linearTicks(Math.min(...vals), Math.max(...vals) * 1.05, 6, true);
  const ys = scale([yTicks[0], yTicks[yTicks.length - 1]], [H - M.bottom, M.top], false);
  const yLabels = tickLabels(yTicks, yFmt);
  const gw = (W - M.left - M.right) / groups.length;
  const bw = Math.max(2, Math.min(36, (gw * 0.8) / names.length));
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, class: 'plot', role: 'img', 'aria-label': opts.title});
  const grid = s('g', {class: 'grid'});
  yTicks.forEach((t, i) => grid.append(s('line', {x1: M.left, x2: W - M.right, y1: ys(t), y2: ys(t)}),
    s('text', {x: M.left - 6, y: ys(t) + 4, class: 'tick y'}, yLabels[i])));
  svg.append(grid);
  const placed = [];
  groups.forEach((g, gi) => {
    const x0 = M.left + gi * gw + (gw - bw * names.length) / 2;
    g.bars.forEach((b) => {
      const i = names.indexOf(b.name);
      const y = ys(Math.max(0, b.value)), y0 = ys(Math.min(0, b.value));
      const rect = s('rect', {class: `bar c${i % 8}`, x: x0 + i * bw, y, width: bw - 2, height: Math.max(1, y0 - y)});
      svg.append(rect);
      placed.push({px: x0 + i * bw + bw / 2, py: y, label: b.title || `${g.label} · ${b.name}: ${yFmt(b.value)}`});
    });
    svg.append(s('text', {class: 'tick x', x: M.left + gi * gw + gw / 2, y: H - M.bottom + 16}, g.label));
  });
  if (opts.reference !== undefined) {
    const y = ys(opts.reference);
    svg.append(s('line', {class: 'reference', x1: M.left, x2: W - M.right, y1: y, y2: y}));
  }
  svg.append(
    s('line', {class: 'axis', x1: M.left, x2: W - M.right, y1: ys(0), y2: ys(0)}),
    s('line', {class: 'axis', x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom}),
    s('text', {class: 'axis-label', transform: `translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)`}, opts.yLabel));
  attachHover(svg, placed, (q) => q.label);
  const table = h('table', {class: 'data'},
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, ''), names.map((n) => h('th', {scope: 'col', class: 'num'}, n)))),
    h('tbody', null, groups.map((g) => h('tr', null, h('th', {scope: 'row'}, g.label),
      names.map((n) => { const b = g.bars.find((x) => x.name === n); return h('td', {class: 'num'}, b ? yFmt(b.value) : ''); })))));
  return figure(opts.title, svg, legendOf(names, true), table, opts.desc);
}

// Stacked areas: one <path class="area"> per non-empty category, stacked in
// the given order; vertical markers (e.g. phase boundaries); hover shows a
// vertical rule and a multi-line tip (hoverLines(i) → [text…]) at the nearest x.
// opts: {title, categories:[name], xs:[x], values:[[v per category]], xLabel, yLabel,
//        xFormat, yFormat, yUnit, markers:[{x, label}], hoverLines(i), desc, id, table}
// table: the chart's "Data as a table" (a <table>, built by the caller: a timeline's
// points are too many for one, so it knows which to show).
// yUnit: the size of the unit yFormat shows (1048576 for MiB of byte values): ticks are round in it.
export function stackedAreaChart(opts) {
  const {categories, xs: X, values} = opts;
  const title = opts.title;
  if (!X.length) return figure(title, h('p', {class: 'empty'}, 'No data to plot.'));
  const xFmt = opts.xFormat || defaultFmt, yFmt = opts.yFormat || defaultFmt;
  const used = categories.map((_, c) => values.some((v) => v[c] > 0));
  const totals = values.map((v) => v.reduce((a, b) => a + b, 0));
  const unit = opts.yUnit || 1;
  const yTicks = linearTicks(0, (Math.max(...totals, 1) / unit) * 1.02, 6, true).map((t) => t * unit);
  const xLo = Math.min(...X), xHi = Math.max(...X);
  const xTicks = linearTicks(xLo, xHi, 8);
  const yLabels = tickLabels(yTicks, yFmt), xLabels = tickLabels(xTicks, xFmt);
  const xs = scale([xLo, xHi], [M.left, W - M.right], false);
  const ys = scale([0, yTicks[yTicks.length - 1]], [H - M.bottom, M.top], false);
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, class: 'plot stacked', role: 'img', 'aria-label': opts.ariaLabel || title});
  if (opts.id) svg.id = opts.id;
  const grid = s('g', {class: 'grid'});
  yTicks.forEach((t, i) => grid.append(s('line', {x1: M.left, x2: W - M.right, y1: ys(t), y2: ys(t)}),
    s('text', {x: M.left - 6, y: ys(t) + 4, class: 'tick y'}, yLabels[i])));
  xTicks.forEach((t, i) => {
    const x = xs(t);
    if (x < M.left - 1 || x > W - M.right + 1) return;
    grid.append(s('line', {x1: x, x2: x, y1: M.top, y2: H - M.bottom, class: 'v'}), s('text', {x, y: H - M.bottom + 16, class: 'tick x'}, xLabels[i]));
  });
  svg.append(grid);
  // Step-shaped areas: memory holds its level until the next event.
  const base = new Float64Array(X.length);
  const px = X.map((x) => xs(x));
  categories.forEach((name, c) => {
    if (!used[c]) return;
    const top = X.map((_, i) => base[i] + values[i][c]);
    let d = `M${px[0].toFixed(1)},${ys(top[0]).toFixed(1)}`;
    for (let i = 1; i < X.length; i++) d += `H${px[i].toFixed(1)}V${ys(top[i]).toFixed(1)}`;
    for (let i = X.length - 1; i > 0; i--) d += `V${ys(base[i]).toFixed(1)}H${px[i - 1].toFixed(1)}`;
    d += `V${ys(base[0]).toFixed(1)}Z`;
    svg.append(s('path', {d, class: `area c${c % 8}`, 'data-category': name}));
    for (let i = 0; i < X.length; i++) base[i] = top[i];
  });
  const mk = s('g', {class: 'markers'});
  for (const [k, m] of (opts.markers || []).entries()) {
    const x = Math.min(W - M.right, Math.max(M.left, xs(m.x)));
    mk.append(s('line', {class: 'phase-marker', x1: x, x2: x, y1: M.top, y2: H - M.bottom, 'data-label': m.label}),
      s('text', {class: 'phase-label', x: x + 3, y: M.top + 10 + (k % 2) * 11}, m.label));
  }
  svg.append(mk,
    s('line', {class: 'axis', x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom}),
    s('line', {class: 'axis', x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom}),
    s('text', {class: 'axis-label', x: (M.left + W - M.right) / 2, y: H - 10}, opts.xLabel),
    s('text', {class: 'axis-label', transform: `translate(16 ${(M.top + H - M.bottom) / 2}) rotate(-90)`}, opts.yLabel));

  // Hover: nearest point by x (binary search over sorted x).
  svg.setAttribute('tabindex', '0');
  const tip = s('g', {class: 'tip', visibility: 'hidden'});
  const rule = s('line', {class: 'tip-rule', y1: M.top, y2: H - M.bottom});
  const bg = s('rect', {rx: 3, class: 'tip-bg'});
  const label = s('text', {class: 'tip-text'});
  tip.append(rule, bg, label);
  svg.append(tip);
  let current = -1;
  const show = (i) => {
    current = i;
    const lines = opts.hoverLines ? opts.hoverLines(i) : [`${xFmt(X[i])}: ${yFmt(totals[i])}`];
    rule.setAttribute('x1', px[i]); rule.setAttribute('x2', px[i]);
    label.replaceChildren(...lines.map((t, k) => s('tspan', {x: 0, dy: k ? 15 : 0}, t)));
    const wText = Math.min(W - 8, 6.6 * Math.max(...lines.map((t) => t.length)) + 12), hText = 15 * lines.length + 8;
    let tx = px[i] + 10;
    if (tx + wText > W) tx = px[i] - 10 - wText;
    const ty = M.top + 4;
    bg.setAttribute('x', tx); bg.setAttribute('y', ty); bg.setAttribute('width', wText); bg.setAttribute('height', hText);
    label.setAttribute('transform', `translate(${tx + 6} ${ty + 15})`);
    tip.setAttribute('visibility', 'visible');
    tip.dataset.index = i;
  };
  const hide = () => tip.setAttribute('visibility', 'hidden');
  svg.addEventListener('pointermove', (ev) => {
    const r = svg.getBoundingClientRect();
    const x = ((ev.clientX - r.left) / r.width) * W;
    let lo = 0, hi = px.length - 1;
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (px[mid] <= x) lo = mid; else hi = mid; }
    show(Math.abs(px[hi] - x) < Math.abs(px[lo] - x) ? hi : lo);
  });
  svg.addEventListener('pointerleave', hide);
  svg.addEventListener('blur', hide);
  svg.addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
    ev.preventDefault();
    show(((current < 0 ? -1 : current) + (ev.key === 'ArrowRight' ? 1 : X.length - 1)) % X.length);
  });
  svg.refreshTip = () => { if (current >= 0 && tip.getAttribute('visibility') === 'visible') show(current); };
  const legend = h('ul', {class: 'legend'}, categories.map((n, c) => used[c] ? h('li', null, h('span', {class: `swatch c${c % 8}`, 'aria-hidden': 'true'}), n) : null));
  return figure(title, svg, legend, opts.table || null, opts.desc);
}
