-- 0027_benchmark_summary_decimals: benchmark_summary's fwd_ms, bwd_ms, opt_ms
-- and tot_ms ("mean ± std", ms) print each phase with one count of decimals
-- per job, as GET /v1/jobs/{id}/table does (api_table_mean_sd_decimals): from
-- the smallest non-zero mean of that phase among the job's runs, enough for 3
-- significant digits, at least 2 and at most 4 (2 from 1 ms up, 3 from 0.1,
-- else 4). Before, every cell had 2 decimals: a GPU's 0.094 ± 0.003 ms
-- optimizer step read 0.09 ± 0.00 and a sub-millisecond forward kept one
-- significant digit. So a job's column reads 12.73 ± 0.06 beside 4.44 ± 0.08
-- and 0.0940 ± 0.0030 beside 12.5000 ± 0.7100. Needs SQLite 3.25 or later
-- (window functions) to be read. The other columns are those of 0025.

DROP VIEW benchmark_summary;
CREATE VIEW benchmark_summary AS
WITH smallest AS ( -- per run: the smallest non-zero |mean| of each phase among its job's runs (ms; NULL: none)
    SELECT run_id,
           MIN(CASE WHEN forward_mean_ms <> 0 THEN abs(forward_mean_ms) END) OVER job   AS fwd,
           MIN(CASE WHEN backward_mean_ms <> 0 THEN abs(backward_mean_ms) END) OVER job AS bwd,
           MIN(CASE WHEN optimizer_mean_ms <> 0 THEN abs(optimizer_mean_ms) END) OVER job AS opt,
           MIN(CASE WHEN total_mean_ms <> 0 THEN abs(total_mean_ms) END) OVER job       AS tot
    FROM benchmark_runs
    WINDOW job AS (PARTITION BY job_id)
),
digits AS ( -- the decimals of those columns: api_table_mean_sd_decimals
    SELECT run_id,
           CASE WHEN fwd IS NULL OR fwd >= 1 THEN 2 WHEN fwd >= 0.1 THEN 3 ELSE 4 END AS fwd,
           CASE WHEN bwd IS NULL OR bwd >= 1 THEN 2 WHEN bwd >= 0.1 THEN 3 ELSE 4 END AS bwd,
           CASE WHEN opt IS NULL OR opt >= 1 THEN 2 WHEN opt >= 0.1 THEN 3 ELSE 4 END AS opt,
           CASE WHEN tot IS NULL OR tot >= 1 THEN 2 WHEN tot >= 0.1 THEN 3 ELSE 4 END AS tot
    FROM smallest
)
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
            ELSE printf('%.*f ± %.*f', d.fwd, r.forward_mean_ms, d.fwd, r.forward_std_ms) END     AS fwd_ms,
       CASE WHEN r.backward_mean_ms IS NULL THEN NULL
            ELSE printf('%.*f ± %.*f', d.bwd, r.backward_mean_ms, d.bwd, r.backward_std_ms) END   AS bwd_ms,
       CASE WHEN r.optimizer_mean_ms IS NULL THEN NULL
            ELSE printf('%.*f ± %.*f', d.opt, r.optimizer_mean_ms, d.opt, r.optimizer_std_ms) END AS opt_ms,
       CASE WHEN r.total_mean_ms IS NULL THEN NULL
            ELSE printf('%.*f ± %.*f', d.tot, r.total_mean_ms, d.tot, r.total_std_ms) END         AS tot_ms,
       CASE WHEN r.status = 'succeeded' AND fp32.total_mean_ms > 0 AND r.total_mean_ms > 0
            THEN fp32.total_mean_ms / r.total_mean_ms END                      AS speedup_vs_fp32,
       r.tokens_per_s                                             AS tokens_per_s,
       r.host_other_cpu_pct                                       AS host_other_cpu_pct,
       r.host_idle_cpu_pct                                        AS host_idle_cpu_pct,
       r.status                                                   AS status,
       r.error                                                    AS error
FROM benchmark_runs r
JOIN digits d ON d.run_id = r.run_id
LEFT JOIN benchmark_runs fp32
       ON fp32.job_id = r.job_id AND fp32.precision = 'fp32' AND fp32.status = 'succeeded'
      AND fp32.model = r.model AND fp32.d_model IS r.d_model AND fp32.d_ff IS r.d_ff
      AND fp32.num_layers IS r.num_layers AND fp32.num_heads IS r.num_heads
      AND fp32.context_length = r.context_length AND fp32.batch_size = r.batch_size
      AND fp32.vocab_size = r.vocab_size AND fp32.mode = r.mode AND fp32.attention = r.attention
      AND fp32.warmup_steps = r.warmup_steps AND fp32.measure_steps = r.measure_steps
      AND fp32.optimizer_in_backward IS r.optimizer_in_backward
ORDER BY r.job_id, r.run_id;
