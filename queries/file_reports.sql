-- File access reports (SPEC §8).

-- name: UpsertFileReport :one
-- One report per (message, file index, reporter); a new report replaces the reporter's last.
INSERT INTO file_reports (box_id, message_id, file_index, reporter_agent_id, status, note, updated_at)
VALUES (@box_id, @message_id, @file_index, @reporter_agent_id, @status, @note, @now)
ON CONFLICT (box_id, message_id, file_index, reporter_agent_id)
DO UPDATE SET status = EXCLUDED.status, note = EXCLUDED.note, updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: FileReports :many
-- Reports on one message, keyset on (file_index, reporter_agent_id); only one reporter's
-- when @reporter_agent_id is given.
SELECT * FROM file_reports
WHERE box_id = @box_id AND message_id = @message_id
  AND (sqlc.narg(reporter_agent_id)::uuid IS NULL OR reporter_agent_id = sqlc.narg(reporter_agent_id)::uuid)
  AND (file_index, reporter_agent_id) > (@after_index::integer, @after_reporter::uuid)
ORDER BY file_index, reporter_agent_id
LIMIT @max_rows;
