-- 0029_benchmark_summary_one_peer: benchmark_summary has exactly one row per
-- benchmark run. Its speedup_vs_fp32 is against one fp32 run: the job's first
-- (lowest run_id) succeeded fp32 run at the run's point (the same join key as
-- 0027's). Before, every such run was joined, so a job holding two fp32 runs
-- at one point (a sweep list that named a value twice, or one model in two
-- spellings: refused since, but stored by earlier lmperfd versions) had each
-- of its runs at that point twice in the view, in GET /v1/jobs/{id}/table, in
-- benchmark_by_precision's speedups and in GET /v1/compare. The other columns
-- are those of 0027.

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
LEFT JOIN benchmark_runs fp32 -- the first of the job's succeeded fp32 runs at the run's point, if any
       ON fp32.run_id = (
          SELECT MIN(p.run_id) FROM benchmark_runs p
          WHERE p.job_id = r.job_id AND p.precision = 'fp32' AND p.status = 'succeeded'
            AND p.model = r.model AND p.d_model IS r.d_model AND p.d_ff IS r.d_ff
            AND p.num_layers IS r.num_layers AND p.num_heads IS r.num_heads
            AND p.context_length = r.context_length AND p.batch_size = r.batch_size
            AND p.vocab_size = r.vocab_size AND p.mode = r.mode AND p.attention = r.attention
            AND p.warmup_steps = r.warmup_steps AND p.measure_steps = r.measure_steps
            AND p.optimizer_in_backward IS r.optimizer_in_backward)
ORDER BY r.job_id, r.run_id;
