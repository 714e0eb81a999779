-- 0028_profile_std: the profile job's per-step times with their spread over
-- the steps, as the seeds report mean ± std: the sample standard deviation
-- (divisor n - 1; 0 when profile_steps is 1) of each per-step figure whose
-- mean is stored, in the same unit, NULL where the mean is NULL (a phase not
-- timed, not gated) and for rows stored before this migration.

ALTER TABLE profile_runs ADD COLUMN step_ms_unprofiled_std REAL;    -- of step_ms_unprofiled (wall clock), ms
ALTER TABLE profile_runs ADD COLUMN step_ms_profiled_std REAL;      -- of step_ms_profiled, ms
ALTER TABLE profile_phases ADD COLUMN event_ns_profiled_std REAL;   -- of event_ns_profiled over the traced steps, ns
ALTER TABLE profile_phases ADD COLUMN event_ns_unprofiled_std REAL; -- of event_ns_unprofiled, ns
ALTER TABLE profile_phases ADD COLUMN gated_ns_profiled_std REAL;   -- of gated_ns_profiled over the gated steps, ns
ALTER TABLE profile_phases ADD COLUMN gated_ns_unprofiled_std REAL; -- of gated_ns_unprofiled, ns
