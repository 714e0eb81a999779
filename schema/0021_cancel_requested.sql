-- 0021_cancel_requested: when a cancel of a running job was asked for. The
-- worker has the grace period (30 s) to stop before it is killed; until then
-- the job is still 'running', and this says a cancel is under way. NULL: none
-- asked (and for every job stored before this migration).

ALTER TABLE jobs ADD COLUMN cancel_requested_at TEXT;
