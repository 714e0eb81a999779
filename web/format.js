// Number and text formatting: one place decides precision and units.

const nf = (digits) => new Intl.NumberFormat('en-US', {minimumFractionDigits: digits, maximumFractionDigits: digits});
const NF = [0, 1, 2, 3, 4].map(nf);
const INT = new Intl.NumberFormat('en-US', {maximumFractionDigits: 0});

const isNum = (x) => typeof x === 'number' && Number.isFinite(x);

// Decimals for a time in ms: 2 from 1 ms up (as the seeds' tables), more below.
export function msDigits(ms) {
  const a = Math.abs(ms);
  if (a >= 1 || a === 0) return 2;
  if (a >= 0.1) return 3;
  return 4;
}

// Decimals for MiB: 3 below 1 MiB, 2 up to 100, then 1 (as mib()).
export function mibDigits(v) {
  const a = Math.abs(v);
  return a >= 100 ? 1 : a >= 1 || a === 0 ? 2 : 3;
}

// A table column's formatter: every cell with the decimals `digitsOf` (msDigits,
// mibDigits) gives the column's smallest non-zero value, so a column reads
// 0.0998 / 12.5000, never 0.100 beside 0.1000. Thousands separated.
export function column(values, digitsOf) {
  const d = columnDigits(values, digitsOf);
  return (x) => fixed(x, d);
}

// column() for byte counts shown in MiB (headers say MiB): one number of decimals per column.
export function mibColumn(byteValues) {
  const d = columnDigits(byteValues.filter(isNum).map((b) => b / 1048576), mibDigits);
  return (x) => (isNum(x) ? fixed(x / 1048576, d) : '—');
}

// "12.34" (no unit; column headers carry "ms").
export function ms(x, digits) {
  if (!isNum(x)) return '—';
  return NF[digits ?? msDigits(x)].format(x);
}

// "12.34 ± 0.56": std uses the mean's decimals so both line up; `digits`
// (a column's, from columnDigits) overrides the mean's own.
export function msPm(mean, std, digits) {
  if (!isNum(mean)) return '—';
  const d = digits ?? msDigits(mean);
  return isNum(std) ? `${NF[d].format(mean)} ± ${NF[d].format(std)}` : NF[d].format(mean);
}

// The decimals of a table column: `digitsOf` (msDigits, mibDigits, sigDigits)
// of its smallest non-zero value, so every cell of the column has the same.
export function columnDigits(values, digitsOf) {
  const nonZero = values.filter((v) => isNum(v) && v !== 0).map(Math.abs);
  return digitsOf(nonZero.length ? Math.min(...nonZero) : 0);
}

// Decimals that show a value to 3 significant digits (at least 2, at most 8):
// 0.000801 → 6, 0.0221 → 4, 12.5 → 2.
export function sigDigits(v) {
  const a = Math.abs(v);
  if (!(a > 0) || a >= 1) return 2;
  return Math.min(8, Math.max(2, 2 - Math.floor(Math.log10(a))));
}

// A number with fixed decimals (any count), thousands separated; '—' when not a number.
const FIXED = new Map();
export function fixed(x, digits) {
  if (!isNum(x)) return '—';
  if (!FIXED.has(digits)) FIXED.set(digits, nf(digits));
  return FIXED.get(digits).format(x);
}

export function int(x) {
  return isNum(x) ? INT.format(x) : '—';
}

// Tokens/s etc: integers with separators, 3 significant digits below 100.
export function rate(x) {
  if (!isNum(x)) return '—';
  return Math.abs(x) >= 100 ? INT.format(x) : x.toPrecision(3);
}

// Decimals of a rate column (tokens/s): 3 significant digits of its smallest
// value, whole numbers from 100 up (19,637.0 beside 67.4; 19,637 beside 137).
export function rateDigits(v) {
  const a = Math.abs(v);
  return a >= 100 || a === 0 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : sigDigits(a);
}

export function ratio(x) {
  return isNum(x) ? NF[2].format(x) + '×' : '—';
}

/* A user's text (a job label) inside a string the page puts together: isolated
 * (U+2068 … U+2069), so right-to-left characters in it do not reorder the text
 * around it. */
export function isolate(text) {
  return '\u2068' + text + '\u2069';
}

export function percent(x) {
  return isNum(x) ? NF[1].format(x * 100).replace(/^-(0\.0)$/, '$1') + ' %' : '—'; /* no "-0.0 %" */
}

// A small relative error in percent to 3 significant digits: "0.00134 %",
// "-0.469 %" (percent() would show both as 0.0 % or -0.5 %).
export function percentSig(x) {
  return isNum(x) ? `${+(x * 100).toPrecision(3)} %` : '—';
}

export function tflops(x) {
  return isNum(x) ? (x >= 1 ? NF[2].format(x) : x.toPrecision(3)) : '—';
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function bytes(x) {
  if (!isNum(x)) return '—';
  let i = 0;
  let v = x;
  while (Math.abs(v) >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  return `${i ? NF[v >= 100 ? 0 : 1].format(v) : INT.format(v)} ${UNITS[i]}`;
}

// Count in SI steps: 1.2 M, 125 k (parameters, FLOPs).
export function si(x, unit = '') {
  if (!isNum(x)) return '—';
  const steps = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [v, p] of steps)
    if (Math.abs(x) >= v) return `${(x / v).toPrecision(3)} ${p}${unit}`;
  return `${x}${unit ? ' ' + unit : ''}`;
}

// Short local date-time; full ISO in a title attribute by the caller.
export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// Seconds between two ISO times, as "1.2 s" / "3 min 4 s".
export function duration(fromIso, toIso) {
  if (!fromIso) return '—';
  const a = new Date(fromIso).getTime();
  const b = toIso ? new Date(toIso).getTime() : Date.now();
  const sec = Math.max(0, (b - a) / 1000);
  if (sec < 60) return `${sec < 10 ? sec.toFixed(2) : sec.toFixed(1)} s`;
  const m = Math.floor(sec / 60);
  if (m < 60) return `${m} min ${Math.round(sec - m * 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

// Bandwidth in GB/s: 2 decimals, 3 significant digits below 1.
export function gbps(x) {
  if (!isNum(x)) return '—';
  return Math.abs(x) >= 1 ? NF[2].format(x) : x.toPrecision(3);
}

// Decimal bytes (1 MB = 10⁶), as all-reduce sizes are written.
export function bytesSI(x) {
  if (!isNum(x)) return '—';
  const steps = [[1e12, 'TB'], [1e9, 'GB'], [1e6, 'MB'], [1e3, 'kB']];
  for (const [v, u] of steps) if (Math.abs(x) >= v) return `${+(x / v).toPrecision(3)} ${u}`;
  return `${x} B`;
}

// Mebibytes without the unit (headers say MiB): 3 decimals below 1 MiB, 2 up to 100, then 1.
export function mib(x) {
  if (!isNum(x)) return '—';
  const v = x / 1048576;
  return NF[mibDigits(v)].format(v);
}

// Nanoseconds shown as microseconds without the unit (headers say µs): 2
// decimals below 100 µs, 1 up to 10,000, then whole µs with separators.
export function usFromNs(ns) {
  if (!isNum(ns)) return '—';
  const v = ns / 1e3;
  return Math.abs(v) >= 1e4 ? INT.format(v) : NF[Math.abs(v) >= 100 ? 1 : 2].format(v);
}

// Decimals for microseconds, as usFromNs: 2 below 100 µs, 1 up to 10,000, then none.
export function usDigits(us) {
  const a = Math.abs(us);
  return a >= 1e4 ? 0 : a >= 100 ? 1 : 2;
}

// A percentage already in percent (share_pct): "12.3 %".
export function pct(x) {
  return isNum(x) ? NF[1].format(x) + ' %' : '—';
}
