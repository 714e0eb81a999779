// Submit form per job kind: fields and defaults from kinds.js, the spec and
// the equivalent curl command shown live; unknown kinds get a JSON editor.
import {h, mount, toast} from '../dom.js';
import {api, token} from '../api.js';
import {KINDS, MODEL_PRESETS} from '../kinds.js';
import {replaceParams, link} from '../route.js';

const SHAPE = ['d_model', 'd_ff', 'num_layers', 'num_heads'];

function fieldId(name) { return `f-${name}`; }

// Builds the input(s) for one field; returns {el, read(): value|undefined, focus()}.
function buildField(f, presets) {
  const id = fieldId(f.name);
  const unit = f.unit ? h('span', {class: 'unit'}, f.unit) : null;
  const help = f.help ? h('span', {class: 'help', id: id + '-help'}, f.help) : null;
  const described = f.help ? id + '-help' : undefined;
  const wrap = (control, extra) => h('div', {class: 'field', dataset: {field: f.name}},
    h('label', {for: id}, f.label), h('span', {class: 'control'}, control, unit), help, extra);

  if (f.type === 'select') {
    const el = h('select', {id, name: f.name}, f.options.map((o) => h('option', {value: o, selected: o === f.default}, o)));
    return {el: wrap(el), read: () => el.value, input: el};
  }
  if (f.type === 'multi') {
    const dflt = [].concat(f.default);
    const boxes = f.options.map((o) => h('input', {type: 'checkbox', name: f.name, value: o, id: `${id}-${o}`, checked: dflt.includes(o)}));
    const el = h('fieldset', {class: 'field multi', dataset: {field: f.name}},
      h('legend', null, f.label),
      boxes.map((b, i) => h('label', {class: 'check', for: b.id}, b, f.options[i])), help);
    return {
      el,
      read: () => {
        const v = boxes.filter((b) => b.checked).map((b) => b.value);
        return f.scalarWhenOne && v.length === 1 ? v[0] : v;
      },
      input: boxes[0],
    };
  }
  if (f.type === 'intlist') {
    const el = h('input', {id, name: f.name, type: 'text', inputmode: 'numeric', value: [].concat(f.default).join(', '), 'aria-describedby': described, pattern: '\\s*\\d+(\\s*,\\s*\\d+)*\\s*'});
    return {
      el: wrap(el),
      read: () => {
        // a token that is not a number stays text, so the server's error names it (not "null")
        const v = el.value.split(',').map((x) => x.trim()).filter(Boolean).map((x) => (/^-?\d+$/.test(x) ? Number(x) : x));
        return v.length === 1 && !f.alwaysArray ? v[0] : v;
      },
      input: el,
    };
  }
  if (f.type === 'strlist') {
    // "1MB, 4096" -> ["1MB", 4096]: plain integers are sent as numbers.
    const el = h('input', {id, name: f.name, type: 'text', value: [].concat(f.default).join(', '), 'aria-describedby': described});
    return {
      el: wrap(el),
      read: () => el.value.split(',').map((x) => x.trim()).filter(Boolean).map((x) => (/^\d+$/.test(x) ? Number(x) : x)),
      input: el,
    };
  }
  if (f.type === 'model') {
    // Presets as checkboxes plus an optional custom shape; one pick -> a scalar.
    const boxes = presets.map((p) => h('input', {type: 'checkbox', name: 'model', value: p.name, id: `${id}-${p.name}`, checked: p.name === f.default}));
    const customBox = h('input', {type: 'checkbox', id: `${id}-custom`, name: 'model-custom'});
    const base = presets.find((p) => p.name === f.default) || presets[0];
    const shape = Object.fromEntries(SHAPE.map((k) => [k, h('input', {id: `${id}-${k}`, name: k, type: 'number', min: 1, step: 1, value: base[k]})]));
    const custom = h('div', {class: 'shape', hidden: true}, SHAPE.map((k) => h('label', {for: `${id}-${k}`}, k, shape[k])));
    customBox.addEventListener('change', () => { custom.hidden = !customBox.checked; });
    const el = h('fieldset', {class: 'field multi', dataset: {field: f.name}},
      h('legend', null, f.label),
      boxes.map((b, i) => {
        const p = presets[i];
        return h('label', {class: 'check', for: b.id, title: `d_model ${p.d_model}, d_ff ${p.d_ff}, ${p.num_layers} layers, ${p.num_heads} heads`}, b, p.name);
      }),
      h('label', {class: 'check', for: customBox.id}, customBox, 'custom shape'), custom, help);
    return {
      el,
      read: () => {
        const v = boxes.filter((b) => b.checked).map((b) => b.value);
        if (customBox.checked) v.push(Object.fromEntries(SHAPE.map((k) => [k, Number(shape[k].value)])));
        return v.length === 1 ? v[0] : v;
      },
      input: boxes[0],
    };
  }
  if (f.type === 'bool') {
    const el = h('input', {id, name: f.name, type: 'checkbox', checked: f.default, 'aria-describedby': described});
    return {el: h('div', {class: 'field', dataset: {field: f.name}}, h('label', {class: 'check', for: id}, el, f.label), help), read: () => el.checked, input: el};
  }
  const isNum = f.type === 'int' || f.type === 'number';
  const el = h('input', {id, name: f.name, type: isNum ? 'number' : 'text', value: f.default, min: f.min, max: f.max,
    step: f.type === 'int' ? 1 : f.step, 'aria-describedby': described, maxlength: f.type === 'text' ? (f.maxLength || 200) : undefined});
  return {
    el: wrap(el),
    read: () => {
      if (!isNum) return el.value;
      return el.value === '' ? undefined : Number(el.value);
    },
    input: el,
  };
}

function curlFor(spec) {
  const body = JSON.stringify(spec).replace(/'/g, `'\\''`);
  const auth = token.get() ? ` \\\n  -H "Authorization: Bearer $LMPERF_TOKEN"` : '';
  return `curl -X POST ${location.origin}/v1/jobs \\\n  -H 'Content-Type: application/json'${auth} \\\n  -d '${body}'`;
}

export async function render(main, ctx) {
  const available = ctx.system.kinds || [];
  const kinds = [...new Set([...available, ...Object.keys(KINDS)])];
  let kind = ctx.params.get('kind') || (available.includes('benchmark') ? 'benchmark' : available[0] || 'numerics');
  let presets = MODEL_PRESETS;
  try {
    const m = await api.models();
    if (m && Array.isArray(m.models) && m.models.length && m.models[0].d_model) presets = m.models;
  } catch { /* the built-in list stands */ }

  const kindSel = h('select', {id: 'kind', name: 'kind', onchange: (e) => { kind = e.target.value; replaceParams(new URLSearchParams({kind})); build(); }},
    kinds.map((k) => h('option', {value: k, selected: k === kind, disabled: !available.includes(k)},
      (Object.hasOwn(KINDS, k) ? KINDS[k].title : k) + (available.includes(k) ? '' : ' (not on this daemon)'))));
  const formBody = h('div');
  const specPre = h('pre', {class: 'code', id: 'spec-json'});
  const curlPre = h('pre', {class: 'code', id: 'curl'});
  const errorBox = h('p', {class: 'error', role: 'alert', hidden: true});
  const submitBtn = h('button', {type: 'submit', class: 'primary'}, 'Submit job');
  const tokenInput = h('input', {id: 'token', type: 'password', autocomplete: 'off', value: token.get(), onchange: (e) => { token.set(e.target.value.trim()); update(); }});
  const form = h('form', {class: 'submit', novalidate: true, 'aria-describedby': 'kind-help'},
    h('div', {class: 'field'}, h('label', {for: 'kind'}, 'Job kind'), kindSel),
    formBody,
    h('details', {class: 'token'}, h('summary', null, 'API token'),
      h('div', {class: 'field'}, h('label', {for: 'token'}, 'Bearer token'), tokenInput,
        h('span', {class: 'help'}, 'only when lmperfd runs with --token; kept in this browser'))),
    errorBox,
    h('div', {class: 'actions'}, submitBtn));
  mount(main, h('h1', null, 'Submit a job'),
    h('div', {class: 'two-col'}, form,
      h('section', {'aria-labelledby': 'eq-h'}, h('h2', {id: 'eq-h'}, 'Equivalent request'),
        h('p', {class: 'muted'}, 'The same job from a shell:'), curlPre, h('h3', null, 'Spec'), specPre)));

  let fields = [];
  let readSpec = () => ({kind});

  function build() {
    errorBox.hidden = true;
    const def = Object.hasOwn(KINDS, kind) ? KINDS[kind] : null; /* not Object.prototype's "constructor" */
    if (def) {
      const noGpu = ctx.system.gpu_count === 0;
      fields = def.fields.map((f) => ({f, ...buildField(noGpu && 'defaultWithoutGpu' in f ? {...f, default: f.defaultWithoutGpu} : f, presets)}));
      mount(formBody, h('p', {class: 'muted', id: 'kind-help'}, def.help), fields.map((x) => x.el));
      readSpec = () => {
        const spec = {kind};
        for (const {f, read} of fields) {
          const v = read();
          // omitEmpty: a blank optional field is left out; omitDefault: the default is left out, so a spec says
          // only what was chosen (and a value that applies to one backend is not sent for another)
          if (v === undefined || (f.omitEmpty && v === '') || (f.omitDefault && JSON.stringify(v) === JSON.stringify(f.default))) continue;
          spec[f.name] = v;
        }
        return spec;
      };
    } else {
      const ta = h('textarea', {id: 'f-json', rows: 12, spellcheck: 'false'}, JSON.stringify({kind}, null, 2));
      fields = [];
      mount(formBody, h('p', {class: 'muted', id: 'kind-help'}, 'No form for this kind yet: write the spec as JSON (see schema/jobs/).'),
        h('div', {class: 'field'}, h('label', {for: 'f-json'}, 'Spec (JSON)'), ta));
      readSpec = () => {
        try { return JSON.parse(ta.value); } catch { return null; }
      };
    }
    update();
  }

  function update() {
    const spec = readSpec();
    specPre.textContent = spec ? JSON.stringify(spec, null, 2) : '(not valid JSON)';
    curlPre.textContent = spec ? curlFor(spec) : '';
  }

  form.addEventListener('input', update);
  form.addEventListener('change', update);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    const spec = readSpec();
    if (!spec) { errorBox.hidden = false; errorBox.textContent = 'The spec is not valid JSON.'; return; }
    submitBtn.disabled = true;
    try {
      const job = await api.submit(spec);
      toast(`Job ${job.id} queued`);
      location.hash = link('/jobs', {highlight: job.id});
    } catch (err) {
      errorBox.hidden = false;
      errorBox.textContent = `${err.status ? err.status + ' ' : ''}${err.code}: ${err.message}`;
      const name = err.field ? String(err.field).split(/[./[]/)[0] : '';
      const bad = name && form.querySelector(`[data-field="${CSS.escape(name)}"] input, [data-field="${CSS.escape(name)}"] select`);
      if (bad) { bad.setAttribute('aria-invalid', 'true'); bad.focus(); } else errorBox.focus?.();
    } finally {
      submitBtn.disabled = false;
    }
  });
  build();
}
