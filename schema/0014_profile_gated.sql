-- 0014_profile_gated: the profile job's overhead by gpu_gated, the GPU's
-- execution of each phase's graph replay free of the host's launch work:
-- CUDA events around the replay, enqueued behind a blocking kernel that
-- spins on a host flag until the host has launched it (NVBench's method).
-- NULL when the phases ran eagerly ("not gated: eager", gpu_gated_note) or
-- the blocking kernel timed out.

ALTER TABLE profile_runs ADD COLUMN step_gpu_gated_ms_unprofiled REAL; -- sum of the gated phases per step, tracing off
ALTER TABLE profile_runs ADD COLUMN step_gpu_gated_ms_profiled REAL;   -- the same, traced
ALTER TABLE profile_runs ADD COLUMN overhead_gpu_gated_pct REAL;       -- from the two above
ALTER TABLE profile_runs ADD COLUMN gpu_gated_note TEXT;               -- how it was measured, or why not
ALTER TABLE profile_phases ADD COLUMN gated_ns_unprofiled REAL;        -- the phase's gated replay, ns, tracing off
ALTER TABLE profile_phases ADD COLUMN gated_ns_profiled REAL;          -- the same, traced
ALTER TABLE profile_phases ADD COLUMN overhead_gated_pct REAL;         -- from the two above
