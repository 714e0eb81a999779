-- 0013_profile_graphs: the profile job's CUDA-graph replays. Numbered above
-- 0012 because PRAGMA user_version holds the highest migration applied: a
-- database already at 12 would never apply a lower number.

ALTER TABLE profile_runs ADD COLUMN graphs INTEGER;             -- 1: the traced and untraced steps were graph replays
ALTER TABLE profile_runs ADD COLUMN graphs_scope TEXT;          -- 'forward', 'forward+backward+optimizer' or 'none'
ALTER TABLE profile_runs ADD COLUMN graphs_note TEXT;           -- why not (graphs: false, fp16 optimizer, cpu worker)
ALTER TABLE profile_runs ADD COLUMN graph_nodes INTEGER;        -- graph nodes whose capture CUPTI recorded
ALTER TABLE profile_runs ADD COLUMN graph_ops_unmapped INTEGER; -- replayed ops without a recorded node: in the CPU ranges around their launch only
ALTER TABLE profile_runs ADD COLUMN replayed_range_count INTEGER; -- range instances made by replays (no CPU push/pop: their kernels' span on the GPU)
-- profile_phases of a replayed run: range_wall_ns is the host time of the graph
-- launch call that replayed the phase (no CPU push/pop exists for it).
