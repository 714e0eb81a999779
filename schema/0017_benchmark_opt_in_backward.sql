-- 0017_benchmark_opt_in_backward: whether a train step ran AdamW inside
-- backward (the spec's optimizer_in_backward; 1 only for train_step runs).
-- Its backward_* times then include most of the optimizer's work, and its
-- optimizer_* times only the token embeddings' update. NULL for rows stored
-- before this migration (all of them ran backward, then the step).

ALTER TABLE benchmark_runs ADD COLUMN optimizer_in_backward INTEGER;
