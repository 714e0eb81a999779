-- 0016_profile_busy: a phase's kernels may overlap in time (the eager
-- backward's overlap GEMMs run on a second stream), so their summed time
-- (kernel_ns) can exceed the time the GPU ran any of them. kernel_busy_ns is
-- the latter, the union of the kernels' intervals; kernel_pct_of_event is
-- 100 · kernel_busy_ns / event_ns_profiled from this migration on. Rows
-- stored before it ran on one stream, where the two times are equal; their
-- kernel_busy_ns is NULL.

ALTER TABLE profile_phases ADD COLUMN kernel_busy_ns REAL; -- ns per instance when at least one kernel of the range ran
