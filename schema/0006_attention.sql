-- 0006_attention: the attention job. One row per point (impl × dtype × seq ×
-- d): forward, backward and forward+backward means in ms, memory before the
-- backward, TFLOP/s (causal counts half of the full 4·B·H·T²·d forward; the
-- backward counts 2.5× the forward), or oom = 1 with the failed request.
-- attention_summary is the seeds' table: one row per seq × d with both impls.

CREATE TABLE attention_runs (
    run_id               INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    job_id               INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    impl                 TEXT    NOT NULL CHECK (impl IN ('naive', 'flash')),
    dtype                TEXT    NOT NULL,
    batch                INTEGER NOT NULL,
    heads                INTEGER NOT NULL,
    seq_len              INTEGER NOT NULL,
    d_head               INTEGER NOT NULL,
    causal               INTEGER NOT NULL,   -- 0 or 1
    passes               INTEGER NOT NULL,
    device               TEXT,                -- 'cuda' or 'cpu'
    oom                  INTEGER NOT NULL,   -- 1: the point did not fit
    oom_request_bytes    INTEGER,
    fwd_ms               REAL,
    bwd_ms               REAL,
    fwd_bwd_ms           REAL,
    mem_before_bwd_bytes INTEGER,
    fwd_flops            REAL,               -- by the convention above
    fwd_tflops           REAL,
    bwd_tflops           REAL,
    fwd_bwd_tflops       REAL
);
CREATE INDEX attention_runs_by_job ON attention_runs (job_id);

CREATE VIEW attention_summary AS
SELECT job_id, dtype, batch, heads, causal, seq_len, d_head,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS naive_fwd_ms,
       max(CASE WHEN impl = 'naive' THEN CASE WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS naive_bwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN oom THEN 'OOM' ELSE round(fwd_ms, 4) END END) AS flash_fwd_ms,
       max(CASE WHEN impl = 'flash' THEN CASE WHEN oom THEN 'OOM' ELSE round(bwd_ms, 4) END END) AS flash_bwd_ms,
       max(CASE WHEN impl = 'naive' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS naive_mem_mib,
       max(CASE WHEN impl = 'flash' THEN round(mem_before_bwd_bytes / 1048576.0, 1) END) AS flash_mem_mib
FROM attention_runs
GROUP BY job_id, dtype, batch, heads, causal, seq_len, d_head
ORDER BY job_id, dtype, seq_len, d_head;
