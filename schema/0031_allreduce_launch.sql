-- 0031_allreduce_launch: how an all-reduce point's ranks were started.
-- 'threads': NCCL, one thread per GPU inside the worker (nccl_launch
-- "threads", the default); 'processes': one process per rank through mpirun
-- (every mpi point; NCCL with nccl_launch "processes", as torch.distributed
-- runs it, and across machines with a hostfile). NULL for rows stored before
-- this migration (nccl ones were threads, mpi ones processes).

ALTER TABLE allreduce_runs ADD COLUMN launch TEXT; -- 'threads' | 'processes'

DROP VIEW allreduce_summary;
CREATE VIEW allreduce_summary AS
SELECT a.job_id, j.label, a.backend, a.launch, a.size_label, a.size_bytes, a.world_size,
       round(a.median_ms, 4) AS median_ms, round(a.mean_ms, 4) AS mean_ms,
       round(a.min_ms, 4) AS min_ms, round(a.max_ms, 4) AS max_ms,
       round(a.algbw_gbps, 2) AS algbw_gbps, round(a.busbw_gbps, 2) AS busbw_gbps,
       a.correct, a.status, a.error, a.devices, e.device_name, j.created_at
FROM allreduce_runs a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN environments e ON e.job_id = a.job_id;
