-- 0025_host_load: how busy the host's CPUs were with other processes while
-- a benchmark run's measured steps ran (daemon/host_load.c: /proc/stat's
-- system-wide busy time less the worker's own CPU time, over the interval
-- from just before the first measured step to just after the last, or over
-- the whole run when that was too short: the run's host_load_window).
-- * host_other_cpu_pct: that share of all the host's CPUs, % in [0, 100];
--   NULL when it could not be known (/proc/stat unreadable, or a run, not
--   only its measured steps, shorter than HOST_LOAD_MIN_TICKS clock ticks:
--   200 ms at USER_HZ 100), for failed runs and for rows stored before this
--   migration. From
--   HOST_LOAD_NOTABLE_PCT (10%) on, with the CPUs all but busy (below), the
--   run's times may be inflated: its JSON carries a warning and the job's
--   table a "Host Busy (%)" column.
-- * host_idle_cpu_pct: the share of all the host's CPUs that nothing used
--   (idle, iowait) meanwhile; NULL as host_other_cpu_pct. Other processes
--   disturbed the run when they used HOST_LOAD_NOTABLE_PCT or more and left
--   under HOST_LOAD_SATURATED_IDLE_PCT (10%) idle: the CPUs were all taken.
-- * host_cpus: the host's online CPUs (NULL for older rows and failed runs).
-- benchmark_summary gains host_other_cpu_pct and host_idle_cpu_pct after
-- tokens_per_s; the other
-- columns are those of 0022.

ALTER TABLE benchmark_runs ADD COLUMN host_other_cpu_pct REAL;
ALTER TABLE benchmark_runs ADD COLUMN host_idle_cpu_pct REAL;
ALTER TABLE benchmark_runs ADD COLUMN host_cpus INTEGER;

DROP VIEW benchmark_summary;
CREATE VIEW benchmark_summary AS
SELECT r.job_id                                                   AS job_id,
       r.run_id                                                   AS run_id,
       r.model                                                    AS model,
       r.d_model                                                  AS d_model,
       r.d_ff                                                     AS d_ff,
       r.num_layers                                               AS num_layers,
       r.num_heads                                                AS num_heads,
       r.context_length                                           AS context_length,
       r.batch_size                                               AS batch_size,
       r.precision                                                AS precision,
       r.mode                                                     AS mode,
       r.warmup_steps                                             AS warmup_steps,
       r.measure_steps                                            AS measure_steps,
       CASE WHEN r.forward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.forward_mean_ms, r.forward_std_ms) END   AS fwd_ms,
       CASE WHEN r.backward_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.backward_mean_ms, r.backward_std_ms) END AS bwd_ms,
       CASE WHEN r.optimizer_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.optimizer_mean_ms, r.optimizer_std_ms) END AS opt_ms,
       CASE WHEN r.total_mean_ms IS NULL THEN NULL
            ELSE printf('%.2f ± %.2f', r.total_mean_ms, r.total_std_ms) END   AS tot_ms,
       CASE WHEN r.status = 'succeeded' AND fp32.total_mean_ms > 0 AND r.total_mean_ms > 0
            THEN fp32.total_mean_ms / r.total_mean_ms END                      AS speedup_vs_fp32,
       r.tokens_per_s                                             AS tokens_per_s,
       r.host_other_cpu_pct                                       AS host_other_cpu_pct,
       r.host_idle_cpu_pct                                        AS host_idle_cpu_pct,
       r.status                                                   AS status,
       r.error                                                    AS error
FROM benchmark_runs r
LEFT JOIN benchmark_runs fp32
       ON fp32.job_id = r.job_id AND fp32.precision = 'fp32' AND fp32.status = 'succeeded'
      AND fp32.model = r.model AND fp32.d_model IS r.d_model AND fp32.d_ff IS r.d_ff
      AND fp32.num_layers IS r.num_layers AND fp32.num_heads IS r.num_heads
      AND fp32.context_length = r.context_length AND fp32.batch_size = r.batch_size
      AND fp32.vocab_size = r.vocab_size AND fp32.mode = r.mode AND fp32.attention = r.attention
      AND fp32.warmup_steps = r.warmup_steps AND fp32.measure_steps = r.measure_steps
      AND fp32.optimizer_in_backward IS r.optimizer_in_backward
ORDER BY r.job_id, r.run_id;
