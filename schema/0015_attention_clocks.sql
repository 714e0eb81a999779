-- 0015_attention_clocks: the GPU's state while an attention point was timed,
-- read through NVML (daemon/gpu_power.c) during its three timed loops: the SM
-- clock (lowest and mean, MHz), the highest board power (W), whether NVML
-- gave a power cap or a thermal / hardware slowdown as a reason for lowered
-- clocks in any reading, and how long the point waited before its loops for
-- the board power to fall below half of the power limit (so that a point
-- does not inherit the power cap of the one before it). NULL where there was
-- no reading (CPU worker, no NVML).

ALTER TABLE attention_runs ADD COLUMN sm_clock_mhz_min INTEGER;
ALTER TABLE attention_runs ADD COLUMN sm_clock_mhz_mean REAL;
ALTER TABLE attention_runs ADD COLUMN power_w_max REAL;
ALTER TABLE attention_runs ADD COLUMN clock_slowdown INTEGER;  -- 0 or 1
ALTER TABLE attention_runs ADD COLUMN settle_ms REAL;
