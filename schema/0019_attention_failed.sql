-- 0019_attention_failed: a point that failed (on a CPU worker: flash, or a
-- dtype other than float32) is a row of attention_runs with its reason, no
-- longer left out. status 'failed' rows have NULL timings; oom = 1 rows stay
-- 'succeeded' (the point ran and did not fit). Rows stored before this
-- migration are all 'succeeded' (failed points were not stored).
-- attention_summary shows a failed impl's cells as 'failed' and the reasons
-- in `failed` ('<impl>: <error>', '; ' between them; NULL when none failed).

ALTER TABLE attention_runs ADD COLUMN status TEXT NOT NULL DEFAULT 'succeeded'
    CHECK (status IN ('succeeded', 'failed'));
ALTER TABLE attention_runs ADD COLUMN error TEXT;

DROP VIEW attention_summary;
CREATE VIEW attention_summary AS
SELECT job_id, dtype, batch, heads, causal, seq_len, d_head,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS naive_fwd_ms,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS naive_bwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS flash_fwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN status = 'failed' THEN 'failed' WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS flash_bwd_ms,
       max(CASE WHEN impl = 'naive' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS naive_mem_mib,
       max(CASE WHEN impl = 'flash' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS flash_mem_mib,
       group_concat(CASE WHEN status = 'failed' THEN impl || ': ' || coalesce(error, 'failed') END, '; ') AS failed
FROM attention_runs
GROUP BY job_id, dtype, batch, heads, causal, seq_len, d_head
ORDER BY job_id, dtype, seq_len, d_head;
