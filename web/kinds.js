// Job kinds as data: the submit form's fields and defaults (mirroring
// schema/jobs/*.json; tests/web checks they agree), and how a run is named.

// Presets from the engine (MODEL.md); GET /v1/models overrides when it lists them.
export const MODEL_PRESETS = [
  {name: 'tiny', d_model: 512, d_ff: 1344, num_layers: 4, num_heads: 16},
  {name: 'small', d_model: 768, d_ff: 3072, num_layers: 12, num_heads: 12},
  {name: 'medium', d_model: 1024, d_ff: 4096, num_layers: 24, num_heads: 16},
  {name: 'large', d_model: 1280, d_ff: 5120, num_layers: 36, num_heads: 20},
  {name: 'xl', d_model: 1600, d_ff: 6400, num_layers: 48, num_heads: 25},
  {name: '2.7B', d_model: 2560, d_ff: 10240, num_layers: 32, num_heads: 32},
];

// Field types: int, number, text, select (options), multi (checkbox list ->
// array, or a scalar when one is ticked and `scalarWhenOne`), intlist ("128, 256"
// -> number or array), bool, model (presets and/or a custom shape).
// `default` is what the schema says; a field equal to its default is still
// sent, so the curl command shows the whole spec. `defaultWithoutGpu`: the
// form's start on a daemon with no GPU, where the schema's default is refused
// or (attention's impl both) half of its points would fail.
const COMMON = [
  {name: 'label', type: 'text', label: 'Label', default: '', help: 'free text shown in lists', omitEmpty: true},
  {name: 'timeout_s', type: 'number', label: 'Time limit', unit: 's', default: 3600, min: 1, max: 604800},
];

// The fields every model-running kind shares (schema/jobs/common.json's
// $defs: model, context_length, batch_size, vocab_size, precision, attention),
// with that kind's modes.
function modelPointFields(modes) {
  return [
    {name: 'model', type: 'model', label: 'Model', default: 'small', help: 'tick several to sweep; a custom shape adds one more'},
    {name: 'context_length', type: 'intlist', label: 'Context length', default: 128, unit: 'tokens', help: 'one or more, comma-separated: 128, 256, 512, 1024'},
    {name: 'batch_size', type: 'intlist', label: 'Batch size', default: 4, unit: 'sequences'},
    {name: 'vocab_size', type: 'int', label: 'Vocabulary', default: 10000, min: 2, max: 1048576},
    {name: 'precision', type: 'multi', label: 'Precision', options: ['fp32', 'tf32', 'bf16', 'fp16'], default: 'fp32', scalarWhenOne: true},
    {name: 'mode', type: 'multi', label: 'Mode', options: modes, default: 'train_step', scalarWhenOne: true},
    {name: 'attention', type: 'select', label: 'Attention', options: ['naive', 'naive_fused', 'flash'], default: 'naive',
     help: 'naive: materialised T×T scores, as CS336; naive_fused: the same, with the scores, softmax and values in one kernel and their backward in another (bf16/fp16 on a GPU; elsewhere as naive); flash: the fused flash kernels (GPU)'},
  ];
}
const SEED = {name: 'seed', type: 'int', label: 'Seed', default: 0, min: 0};

export const KINDS = {
  numerics: {
    title: 'Numerics',
    help: 'Mixed-precision accumulation: add the summand count times for each (accumulator, summand) dtype pairing. ' +
      'Precision report: the formats every op of the model uses under fp32, tf32, bf16 and fp16.',
    fields: [
      {name: 'experiments', type: 'multi', label: 'Experiments', options: ['accumulation', 'precision_report'], default: ['accumulation']},
      {name: 'summand', type: 'number', label: 'Summand', default: 0.01, min: 0, max: 1000, step: 'any'},
      {name: 'count', type: 'int', label: 'Count', default: 1000, min: 1, max: 10000000000},
      {name: 'device', type: 'select', label: 'Device', options: ['auto', 'cpu'], default: 'auto'},
      ...COMMON,
    ],
  },
  benchmark: {
    title: 'Benchmark',
    help: 'End-to-end step timing of the TransformerLM: forward, backward and optimizer per step, warm-up steps kept and flagged. A list of context lengths or precisions runs every combination.',
    fields: [
      ...modelPointFields(['forward', 'forward_backward', 'train_step']),
      {name: 'warmup_steps', type: 'intlist', label: 'Warm-up steps', default: 5, help: 'run and shown, left out of the statistics; several (0, 1, 2, 5) compare the statistics without and with warm-up'},
      {name: 'measure_steps', type: 'int', label: 'Measured steps', default: 10, min: 1, max: 10000},
      SEED,
      {name: 'graphs', type: 'bool', label: 'CUDA graphs', default: false, help: 'capture each step into a CUDA graph (ignored on the CPU)'},
      {name: 'optimizer_in_backward', type: 'bool', label: 'Optimizer in backward', default: false, help: 'train_step: each layer\'s AdamW as soon as its gradients are complete, beside the rest of the backward (not with fp16); the backward phase then holds most of the optimizer\'s time'},
      ...COMMON,
    ],
  },
  allreduce: {
    title: 'All-reduce',
    help: 'Time an all-reduce of each size across each number of ranks: NCCL over this machine\'s GPUs, MPI over CPU processes, or both. Reports mean and median time, algorithm and bus bandwidth, and checks the sum.',
    fields: [
      {name: 'backend', type: 'multi', label: 'Backend', options: ['nccl', 'mpi'], default: 'nccl', defaultWithoutGpu: 'mpi', scalarWhenOne: true,
       help: 'tick both to compare GPU and CPU in one job (nccl\'s points run first, then its GPUs are given back)'},
      {name: 'sizes', type: 'strlist', label: 'Sizes per rank', default: ['1MB', '10MB', '100MB', '1GB'], help: 'comma-separated bytes or with a unit: 1MB (10⁶), 1MiB (2²⁰), GB, GiB'},
      {name: 'world_sizes', type: 'intlist', label: 'World sizes', default: [2], alwaysArray: true, unit: 'ranks'},
      {name: 'dtype', type: 'select', label: 'Data type', options: ['float32'], default: 'float32'},
      {name: 'warmup', type: 'int', label: 'Warm-up iterations', default: 5, min: 0, max: 1000},
      {name: 'iterations', type: 'int', label: 'Measured iterations', default: 20, min: 1, max: 10000},
      {name: 'nccl_launch', type: 'select', label: 'NCCL launch', options: ['threads', 'processes'], default: 'threads', omitDefault: true,
       help: 'nccl only: threads, one per GPU inside the worker; processes, one per GPU through mpirun, as torch.distributed runs NCCL (and across machines with a hostfile)'},
      {name: 'hostfile', type: 'text', label: 'Hostfile', default: '', omitEmpty: true, maxLength: 4096,
       help: 'optional: an Open MPI hostfile on the daemon\'s machine, to spread the ranks over machines (mpi, or nccl with processes); lmperfd at the same path on each'},
      ...COMMON,
    ],
  },
  memory: {
    title: 'Memory',
    help: 'Record every allocation and free while the model runs inference (forward only) or train steps: peaks per phase, the breakdown by category at the peak, the largest allocations, an estimate beside the measurement, and a timeline. A list of context lengths, precisions or modes runs every combination.',
    fields: [
      ...modelPointFields(['inference', 'train_step']),
      {name: 'steps', type: 'int', label: 'Steps', default: 2, min: 1, max: 20, help: 'steps recorded'},
      {name: 'timeline_points', type: 'int', label: 'Timeline points', default: 2000, min: 10, max: 20000, help: 'the downsampled timeline keeps each bucket\'s highest total'},
      {name: 'record_events', type: 'bool', label: 'Keep the event list', default: true, help: 'for download: GET /v1/jobs/{id}/events?run=N'},
      {name: 'optimizer_in_backward', type: 'bool', label: 'Optimizer in backward', default: false, help: 'train_step: each layer\'s AdamW inside backward, its gradients released once applied (not with fp16)'},
      SEED,
      ...COMMON,
    ],
  },
  attention: {
    title: 'Attention',
    help: 'Scaled dot-product attention alone, naive (materialised T×T scores) and/or the fused flash kernels: forward, backward and forward+backward time, memory before the backward and TFLOP/s per point; a point that does not fit is an OOM row. Lists sweep every combination. A CPU worker runs naive only (the CPU reference, float32).',
    fields: [
      {name: 'impl', type: 'select', label: 'Implementation', options: ['naive', 'flash', 'both'], default: 'both', defaultWithoutGpu: 'naive',
       help: 'flash needs a GPU: on a daemon without one the form starts on naive'},
      {name: 'dtype', type: 'multi', label: 'Data type', options: ['float32', 'bfloat16', 'float16'], default: 'float32', scalarWhenOne: true},
      {name: 'batch', type: 'int', label: 'Batch', default: 8, min: 1, max: 1024},
      {name: 'heads', type: 'int', label: 'Heads', default: 1, min: 1, max: 1024},
      {name: 'seq_len', type: 'intlist', label: 'Sequence length', default: [256, 1024, 4096, 8192, 16384], unit: 'tokens', help: 'one or more, comma-separated (required; the form starts with part of the seeds\' grid)'},
      {name: 'd_head', type: 'intlist', label: 'Head dimension', default: 64, help: 'one or more; flash supports 16, 32, 64, 80, 128'},
      {name: 'causal', type: 'bool', label: 'Causal mask', default: false, help: 'causal FLOPs count half of the full forward'},
      {name: 'passes', type: 'int', label: 'Timed passes', default: 100, min: 1, max: 10000},
      {name: 'warmup', type: 'int', label: 'Warm-up passes', default: 5, min: 0, max: 1000},
      ...COMMON,
    ],
  },
  profile: {
    title: 'Profile',
    help: 'Trace every kernel of a few steps with CUPTI (needs a GPU worker) and summarise them per NVTX range: the nsys kernel tables, the top kernel, GEMM share, softmax vs matmuls, a roofline, and a Chrome trace.',
    fields: [
      ...modelPointFields(['forward', 'train_step']),
      {name: 'warmup_steps', type: 'int', label: 'Warm-up steps', default: 2, min: 0, max: 100},
      {name: 'profile_steps', type: 'int', label: 'Traced steps', default: 1, min: 1, max: 10},
      {name: 'graphs', type: 'bool', label: 'CUDA graphs', default: true, help: 'each phase a replay of one CUDA graph (the kernel tables are the same as eager; off: the launch gaps show in the trace)'},
      {name: 'optimizer_in_backward', type: 'bool', label: 'Optimizer in backward', default: false, help: 'train_step: each layer\'s AdamW inside backward, traced in "optimizer in backward" ranges (not with fp16)'},
      SEED,
      ...COMMON,
    ],
  },
};

// Short name of a model shape: the preset name, or "d64 L2 H4 ff128".
export function modelName(run) {
  const m = run.model;
  if (typeof m === 'string' && m !== 'custom') return m;
  if (m && typeof m === 'object' && m.name) return m.name;
  const src = m && typeof m === 'object' ? m : run;
  const preset = MODEL_PRESETS.find((p) => p.d_model === src.d_model && p.d_ff === src.d_ff &&
    p.num_layers === src.num_layers && p.num_heads === src.num_heads);
  if (preset && (typeof m !== 'string')) return preset.name;
  return `d${src.d_model} L${src.num_layers} H${src.num_heads} ff${src.d_ff}`;
}

// Model name of a job from its spec (for the list's model filter).
export function specModel(spec) {
  if (!spec || spec.model === undefined) return '';
  const one = (m) => (typeof m === 'string' ? m : m && m.name ? m.name : modelName({model: m}));
  return Array.isArray(spec.model) ? spec.model.map(one).join(', ') : one(spec.model);
}

// Fields that define "the same configuration" of a benchmark run (history).
// Warm-up counts: the seeds compare runs with and without it.
export const CONFIG_FIELDS = ['d_model', 'd_ff', 'num_layers', 'num_heads', 'context_length', 'batch_size',
  'vocab_size', 'precision', 'mode', 'attention', 'warmup_steps', 'graphs', 'optimizer_in_backward'];
// Switches that runs stored before they existed lack: absent counts as off.
const BOOLEAN_FIELDS = new Set(['graphs', 'optimizer_in_backward']);

export function configKey(run) {
  return CONFIG_FIELDS.map((f) => `${f}=${BOOLEAN_FIELDS.has(f) ? !!run[f] : run[f]}`).join(',');
}
