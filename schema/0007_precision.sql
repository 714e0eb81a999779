-- 0007_precision: the numerics job's precision_report experiment. One run per
-- precision (fp32, tf32, bf16, fp16); one row per op of the model and phase
-- as the engine ran it during one traced forward + backward + AdamW step of a
-- small model (layers merged; calls counted): the value formats of its inputs
-- and output, the accumulation format, and how 16-bit GEMM inputs were held.

CREATE TABLE numerics_precision (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    job_id      INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    precision   TEXT    NOT NULL CHECK (precision IN ('fp32', 'tf32', 'bf16', 'fp16')),
    seq         INTEGER NOT NULL,   -- order of first call within the run
    phase       TEXT    NOT NULL,   -- 'forward', 'backward', 'optimizer'
    op          TEXT    NOT NULL,
    inputs      TEXT    NOT NULL,   -- value formats, ', '-separated
    output      TEXT    NOT NULL,
    accumulate  TEXT    NOT NULL,   -- 'float32', 'float64' or '-'
    storage     TEXT    NOT NULL,   -- 16-bit GEMM inputs: '16-bit tensor' / 'cast in gemm'; else ''
    calls       INTEGER NOT NULL,   -- calls in the traced step
    computed_on TEXT    NOT NULL
);
CREATE INDEX numerics_precision_by_job ON numerics_precision (job_id);
