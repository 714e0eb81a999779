// Tiny DOM helpers: build elements from data (never innerHTML with API text).

// h('td', {class: 'num', dataset: {value: 3}}, 'text', child, [more])
// attrs: class, dataset, on<event> handlers, boolean attrs, everything else setAttribute.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// Same as h() in the SVG namespace.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' && 'value' in el && el.namespaceURI !== SVG_NS) el.value = v;
    else if (k === 'checked' || k === 'selected') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces all children of el.
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Shows a short message in the live region (screen readers announce it).
export function toast(text, kind = 'info') {
  const el = document.getElementById('toast');
  if (!el) return;
  el.textContent = text;
  el.className = 'show ' + kind;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.className = ''; }, 4000);
}

// Starts a browser download of text.
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], {type}));
  const a = h('a', {href: url, download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Puts text on the clipboard: the Clipboard API where the page may use it (a
// secure context: localhost, https), else a selected hidden textarea and the
// copy command. Resolves true when copied.
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) { await navigator.clipboard.writeText(text); return true; }
  } catch { /* denied: try the old way */ }
  const ta = h('textarea', {readonly: true, 'aria-hidden': 'true', style: 'position:fixed;top:0;left:-9999px;opacity:0'});
  ta.value = text;
  document.body.append(ta);
  const focused = document.activeElement;
  ta.select();
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  ta.remove();
  if (focused && focused.focus) focused.focus({preventScroll: true});
  return ok;
}
