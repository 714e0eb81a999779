-- 0018_profile_opt_in_backward: whether a profiled train step ran AdamW
-- inside backward (the spec's optimizer_in_backward; 1 only for train_step
-- runs). Its backward range then holds the per-layer updates, each in an
-- "optimizer in backward" range of its own, and its optimizer range only the
-- token embeddings' update. NULL for rows stored before this migration (all
-- of them ran backward, then the step).

ALTER TABLE profile_runs ADD COLUMN optimizer_in_backward INTEGER;
