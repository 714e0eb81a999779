// The hash URL: #/path?query. Pages read their state from it and write
// filters back without re-rendering.

// Parsed hash: {path, params: URLSearchParams}.
export function currentRoute() {
  const raw = location.hash.replace(/^#/, '') || '/jobs';
  const i = raw.indexOf('?');
  return {path: i < 0 ? raw : raw.slice(0, i), params: new URLSearchParams(i < 0 ? '' : raw.slice(i + 1))};
}

// Rewrites the hash's query in place (no hashchange, no re-render).
export function replaceParams(params) {
  const {path} = currentRoute();
  const q = params.toString();
  history.replaceState(null, '', '#' + path + (q ? '?' + q : ''));
}

// Builds "#/path?query" from an object, dropping empty values.
export function link(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return '#' + path + (s ? '?' + s : '');
}
