// Entry point: hash router (#/jobs, #/jobs/12, #/submit, #/compare, #/history),
// the header's daemon summary, and one error boundary for every page.
import {h, mount} from './dom.js';
import {api, connection} from './api.js';
import {when} from './format.js';
import * as jobs from './pages/jobs.js';
import * as job from './pages/job.js';
import * as submit from './pages/submit.js';
import * as compare from './pages/compare.js';
import * as historyPage from './pages/history.js';
import {currentRoute} from './route.js';

// Routes as data: pattern → page module; {id} captures a number.
const ROUTES = [
  {path: /^\/jobs\/(\d+)$/, page: job, nav: 'jobs'},
  {path: /^\/jobs$/, page: jobs, nav: 'jobs'},
  {path: /^\/submit$/, page: submit, nav: 'submit'},
  {path: /^\/compare$/, page: compare, nav: 'compare'},
  {path: /^\/history$/, page: historyPage, nav: 'history'},
];

const main = document.getElementById('main');
let cleanup = null;
let system = null;

// Fallback while the daemon cannot be asked: no kinds, no devices.
const NO_SYSTEM = {kinds: [], devices: []};

async function loadSystem() {
  try {
    system = await api.system();
    const dev = (system.devices || []).map((d) => d.name).join(', ');
    document.getElementById('sysinfo').textContent =
      `${system.hostname} · ${dev || 'no device'} · lmperf ${system.version}`;
  } catch (e) {
    system = NO_SYSTEM;
    document.getElementById('sysinfo').textContent = 'daemon unreachable';
  }
  return system;
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* page already gone */ } cleanup = null; }
  const {path, params} = currentRoute();
  const r = ROUTES.find((x) => x.path.test(path));
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (r && a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!r) {
    mount(main, h('h1', null, 'Not found'), h('p', null, 'No page at ', h('code', null, path), '. ', h('a', {href: '#/jobs'}, 'Go to the job list.')));
    return;
  }
  const m = path.match(r.path);
  const token = {};
  route.current = token;
  mount(main, h('p', {class: 'loading'}, 'Loading…'));
  try {
    const sys = system || await loadSystem();
    if (route.current !== token) return;
    const c = await r.page.render(main, {id: m[1] ? Number(m[1]) : null, params, system: sys, isCurrent: () => route.current === token});
    if (route.current === token) cleanup = c || null; else if (c) c();
  } catch (e) {
    if (route.current !== token) return;
    mount(main, h('h1', null, 'Something went wrong'), h('p', {class: 'error', role: 'alert'}, e.message || String(e)));
  }
}

// While lmperfd does not answer (stopped, restarting, network): a banner that
// says so, and a probe every few seconds; when it answers again the banner
// goes, the header is read again, and a page drawn without it is drawn again.
const OFFLINE_PROBE_MS = 2000;
const offline = document.getElementById('offline');
let probe = null;
connection.listen((ok) => {
  clearTimeout(probe);
  if (!ok) {
    offline.textContent = `lmperfd at ${location.host} is not answering (since ${when(new Date().toISOString())}); retrying every ${OFFLINE_PROBE_MS / 1000} s. ` +
      'Pages show what they last loaded.';
    offline.hidden = false;
    const again = () => { probe = setTimeout(() => api.system().catch(() => null).then(() => { if (!connection.reachable) again(); }), OFFLINE_PROBE_MS); };
    again();
    return;
  }
  offline.hidden = true;
  const wasDown = system === NO_SYSTEM;
  loadSystem().then(() => { if (wasDown && system !== NO_SYSTEM) route(); });
});

window.addEventListener('hashchange', () => {
  route().then(() => {
    const heading = main.querySelector('h1');
    if (heading) { heading.setAttribute('tabindex', '-1'); heading.focus({preventScroll: true}); }
  });
});
route();
