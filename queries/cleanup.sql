-- Retention cleanup bookkeeping per box (SPEC §11, admin API).

-- name: GetCleanupStatus :one
SELECT * FROM cleanup_status WHERE box_id = @box_id;

-- name: RecordCleanupRun :exec
-- A retention run that deleted @deleted messages (after a write, or the retroactive cleanup
-- after a lowered cap). Taken after the channel locks, like every retention run. Only a
-- retroactive run clears a failed state: a run after a write applies the caps to one
-- channel, and others may still hold more than the caps a failed cleanup left unapplied.
INSERT INTO cleanup_status (box_id, state, runs, deleted_messages, last_run_at)
VALUES (@box_id, 'idle', 1, @deleted, @now::timestamptz)
ON CONFLICT (box_id) DO UPDATE
SET state = CASE WHEN @retroactive::boolean THEN 'idle' ELSE cleanup_status.state END,
    runs = cleanup_status.runs + 1, deleted_messages = cleanup_status.deleted_messages + EXCLUDED.deleted_messages,
    last_run_at = EXCLUDED.last_run_at;

-- name: FailedCleanupBoxes :many
-- The boxes whose last retroactive cleanup failed (RetryFailedCleanups).
SELECT box_id FROM cleanup_status WHERE state = 'failed' ORDER BY box_id;

-- name: RecordCleanupFailure :exec
INSERT INTO cleanup_status (box_id, state, failures, last_run_at, last_error)
VALUES (@box_id, 'failed', 1, @now::timestamptz, @last_error::text)
ON CONFLICT (box_id) DO UPDATE
SET state = 'failed', failures = cleanup_status.failures + 1, last_run_at = EXCLUDED.last_run_at,
    last_error = EXCLUDED.last_error;

-- name: LockBoxChannels :many
-- The next @max_rows channels of the box after @after_channel_id, locked until commit in
-- channel_id order (the order sends lock them in), for the retroactive cleanup.
SELECT channel_id FROM channels
WHERE box_id = @box_id AND channel_id > @after_channel_id::uuid
ORDER BY channel_id
LIMIT @max_rows
FOR UPDATE;

-- name: CleanupTotals :one
-- Every box's retention figures summed, for /metrics (one row per box that ever ran retention).
-- The last success is the newest run of a box whose last run succeeded, in Unix seconds (0: none).
SELECT COALESCE(sum(runs), 0)::bigint AS runs, COALESCE(sum(deleted_messages), 0)::bigint AS deleted_messages,
       COALESCE(sum(failures), 0)::bigint AS failures, count(*) FILTER (WHERE state = 'failed')::bigint AS boxes_failed,
       COALESCE(extract(epoch FROM max(last_run_at) FILTER (WHERE state = 'idle')), 0)::float8 AS last_success_unix
FROM cleanup_status;
