-- 0008_benchmark_gpu: what a benchmark run on a cuda worker adds. GPU time
-- of each phase from CUDA events recorded around it on the stream (beside
-- the synchronised wall clock of the *_ms columns of 0002), which phases ran
-- as CUDA graph replays, and the loss of the last forward. Times in ms; NULL
-- on cpu workers and for phases not run.

ALTER TABLE benchmark_runs ADD COLUMN graphs_scope TEXT;     -- 'none', 'forward', 'forward+backward', 'forward+backward+optimizer'
ALTER TABLE benchmark_runs ADD COLUMN graphs_note TEXT;      -- why graphs were not (fully) applied
ALTER TABLE benchmark_runs ADD COLUMN final_loss REAL;       -- loss of the last measured forward
ALTER TABLE benchmark_runs ADD COLUMN forward_gpu_mean_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN forward_gpu_std_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN forward_gpu_median_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN backward_gpu_mean_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN backward_gpu_std_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN backward_gpu_median_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN optimizer_gpu_mean_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN optimizer_gpu_std_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN optimizer_gpu_median_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN total_gpu_mean_ms REAL;    -- sum of the phases' GPU times
ALTER TABLE benchmark_runs ADD COLUMN total_gpu_std_ms REAL;
ALTER TABLE benchmark_runs ADD COLUMN total_gpu_median_ms REAL;
