-- 0023_attention_summary_fwd_bwd: attention_summary gains each impl's forward
-- + backward time (attention_runs.fwd_bwd_ms: on a GPU the median of passes
-- that each time a forward and its backward together; on the CPU reference
-- the two medians summed), the "end-to-end" column of the CS336 flash
-- benchmarking table,
-- after the separate forward and backward columns; a failed point reads
-- 'failed', one that did not fit 'OOM', as the other time columns. Times in
-- ms. The other columns are those of 0019.

DROP VIEW attention_summary;
CREATE VIEW attention_summary AS
SELECT job_id, dtype, batch, heads, causal, seq_len, d_head,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS naive_fwd_ms,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS naive_bwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS flash_fwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS flash_bwd_ms,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_bwd_ms, 4) END END) AS naive_fwd_bwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_bwd_ms, 4) END END) AS flash_fwd_bwd_ms,
       max(CASE WHEN impl = 'naive' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS naive_mem_mib,
       max(CASE WHEN impl = 'flash' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS flash_mem_mib,
       group_concat(CASE WHEN status = 'failed' THEN impl || ': ' || coalesce(error, 'failed') END, '; ') AS failed
FROM attention_runs
GROUP BY job_id, dtype, batch, heads, causal, seq_len, d_head
ORDER BY job_id, dtype, seq_len, d_head;
