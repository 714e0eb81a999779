-- 0030_profile_gemm_split: a phase's GPU span (gpu_span_ns) split by what
-- ran at each instant, per instance of the range, ns: at least one GEMM
-- kernel (gemm_busy_ns, the union of the intervals of the kernels whose
-- is_gemm is 1 in profile_kernels), kernels but no GEMM (other_only_ns:
-- kernel_busy_ns - gemm_busy_ns, the non-GEMM time no GEMM hides), no kernel
-- at all (gpu_idle_ns: gpu_span_ns - kernel_busy_ns; memcpys and memsets
-- count as idle). NULL for rows stored before this migration.

ALTER TABLE profile_phases ADD COLUMN gemm_busy_ns REAL;  -- ns per instance when at least one GEMM kernel ran
ALTER TABLE profile_phases ADD COLUMN other_only_ns REAL; -- ns per instance when kernels, none of them a GEMM, ran
ALTER TABLE profile_phases ADD COLUMN gpu_idle_ns REAL;   -- ns per instance inside the GPU span when no kernel ran
