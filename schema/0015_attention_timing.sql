-- 0015_attention_timing: how an attention point's times were taken.
-- From here on fwd_ms, bwd_ms and fwd_bwd_ms are the medians of the per-pass
-- times (each pass between its own two CUDA events, the host waiting for it
-- before the next: the PyTorch peer's torch_attn.py and the seeds' protocol);
-- the means of the same passes are beside them.
-- The GPU's state during the three timed loops, read through NVML
-- (daemon/gpu_power.c; readings NVML marks idle left out): the SM clock
-- (lowest and mean, MHz), the highest board power (W), whether NVML gave a
-- power cap or a thermal / hardware slowdown as a reason for lowered clocks
-- in any reading, and how long the point waited before its loops for the
-- board power to fall below half of the power limit (so that a point does
-- not inherit the power cap of the one before it). NULL where there was no
-- reading (CPU worker, no NVML, loops shorter than the readings' period).

ALTER TABLE attention_runs ADD COLUMN fwd_mean_ms REAL;
ALTER TABLE attention_runs ADD COLUMN bwd_mean_ms REAL;
ALTER TABLE attention_runs ADD COLUMN fwd_bwd_mean_ms REAL;
ALTER TABLE attention_runs ADD COLUMN sm_clock_mhz_min INTEGER;
ALTER TABLE attention_runs ADD COLUMN sm_clock_mhz_mean REAL;
ALTER TABLE attention_runs ADD COLUMN power_w_max REAL;
ALTER TABLE attention_runs ADD COLUMN clock_slowdown INTEGER;  -- 0 or 1
ALTER TABLE attention_runs ADD COLUMN settle_ms REAL;
