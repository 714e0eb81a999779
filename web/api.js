// The daemon's HTTP API as async functions. Errors throw ApiError with the
// server's {"error":{code,message,field}} when there is one.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

const TOKEN_KEY = 'lmperf.token';
export const token = {
  get: () => localStorage.getItem(TOKEN_KEY) || '',
  set: (t) => (t ? localStorage.setItem(TOKEN_KEY, t) : localStorage.removeItem(TOKEN_KEY)),
};

// Whether lmperfd answered the last request: listeners hear each change
// (app.js shows a banner while it does not).
const reachListeners = new Set();
let reachable = true;
export const connection = {
  get reachable() { return reachable; },
  listen(fn) { reachListeners.add(fn); return () => reachListeners.delete(fn); },
  set(ok) {
    if (ok === reachable) return;
    reachable = ok;
    for (const fn of reachListeners) { try { fn(ok); } catch { /* a listener's own problem */ } }
  },
};

async function call(method, path, body) {
  const headers = {Accept: 'application/json'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && token.get()) headers.Authorization = 'Bearer ' + token.get();
  let res;
  try {
    res = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) {
    connection.set(false);
    throw new ApiError(0, 'unreachable', `lmperfd is not reachable (${e.message})`);
  }
  connection.set(true);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const e = data && data.error;
    throw new ApiError(res.status, e ? e.code : 'http_' + res.status, e ? e.message : text || res.statusText, e && e.field);
  }
  return data;
}

// GET /v1/jobs/{id}/table's address: query {run, range, experiment, pivot} and format (md, csv, json).
export function tableUrl(id, query, format) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  q.set('format', format);
  return `/v1/jobs/${id}/table?${q}`;
}

export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'interrupted']);
export const ACTIVE = new Set(['queued', 'running']);

// Polling: every second while something is queued or running, else slowly.
export const POLL_ACTIVE_MS = 1000;
export const POLL_IDLE_MS = 5000;

// Finished jobs never change: keep their details.
const finished = new Map();

export const api = {
  system: () => call('GET', '/v1/system'),
  models: () => call('GET', '/v1/models'),
  list(params = {}) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) q.set(k, v);
    return call('GET', '/v1/jobs' + (q.size ? '?' + q : ''));
  },
  async job(id) {
    if (finished.has(id)) return finished.get(id);
    const job = await call('GET', `/v1/jobs/${id}`);
    if (TERMINAL.has(job.status)) finished.set(id, job);
    return job;
  },
  submit: (spec) => call('POST', '/v1/jobs', spec),
  cancel: (id) => call('DELETE', `/v1/jobs/${id}`),
  // query: the table's selectors (run, range, experiment, pivot).
  table: (id, query = {}) => call('GET', tableUrl(id, query, 'json')),
  // The table as the text people paste (format md or csv); query: run, range, experiment, pivot.
  async tableText(id, query = {}, format = 'md') {
    const url = tableUrl(id, query, format);
    let res;
    try { res = await fetch(url, {headers: {Accept: 'text/plain'}}); } catch (e) {
      connection.set(false);
      throw new ApiError(0, 'unreachable', `lmperfd is not reachable (${e.message})`);
    }
    const text = await res.text();
    if (!res.ok) {
      let e = null;
      try { e = JSON.parse(text).error; } catch { /* not JSON */ }
      throw new ApiError(res.status, e ? e.code : 'http_' + res.status, e ? e.message : text || res.statusText, e && e.field);
    }
    return text;
  },

  // Details of many jobs, a few requests at a time; missing ids are skipped.
  async jobs(ids, parallel = 6) {
    const out = new Map();
    const queue = [...ids];
    const worker = async () => {
      while (queue.length) {
        const id = queue.shift();
        try { out.set(id, await api.job(id)); } catch (e) { if (e.status !== 404) throw e; }
      }
    };
    await Promise.all(Array.from({length: parallel}, worker));
    return ids.filter((id) => out.has(id)).map((id) => out.get(id));
  },

  // Every job of a kind (newest first), following pages of the list endpoint.
  async all(params = {}, max = 5000) {
    const out = [];
    for (let offset = 0; offset < max;) {
      const page = await api.list({...params, limit: 1000, offset});
      out.push(...page.jobs);
      offset += page.jobs.length;
      if (!page.jobs.length || offset >= page.total) break;
    }
    return out;
  },
};
