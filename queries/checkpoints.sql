-- name: GetCheckpoint :one
SELECT * FROM checkpoints WHERE box_id = @box_id AND agent_id = @agent_id;

-- name: InsertFirstCheckpoint :one
-- CAS from revision "0": only one concurrent first save can insert.
INSERT INTO checkpoints (box_id, agent_id, revision, body, saved_at, saved_by_session_id, profile_version)
VALUES (@box_id, @agent_id, 1, @body, @now, @session_id, @profile_version)
ON CONFLICT (box_id, agent_id) DO NOTHING
RETURNING revision, saved_at;

-- name: UpdateCheckpoint :one
-- CAS: matches only while the stored revision is the expected one.
UPDATE checkpoints
SET revision = revision + 1, body = @body, saved_at = @now,
    saved_by_session_id = @session_id, profile_version = @profile_version
WHERE box_id = @box_id AND agent_id = @agent_id AND revision = @expected_revision
RETURNING revision, saved_at;

-- name: CheckpointRevision :one
SELECT COALESCE((SELECT revision FROM checkpoints WHERE box_id = @box_id AND agent_id = @agent_id), 0)::bigint;
