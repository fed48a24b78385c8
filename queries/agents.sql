-- name: CreateAgent :one
INSERT INTO agents (box_id, agent_id, host_id, name, listed, role, description, profile_text, created_at)
VALUES (@box_id, @agent_id, @host_id, @name, @listed, @role, @description, @profile_text, @now)
ON CONFLICT (box_id, host_id, name) DO NOTHING
RETURNING *;

-- name: GetAgentWithHost :one
SELECT sqlc.embed(agents), hosts.name AS host_name
FROM agents JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id
WHERE agents.box_id = @box_id AND agents.agent_id = @agent_id;

-- name: FindAgentsByName :many
SELECT agent_id FROM agents WHERE box_id = @box_id AND name = @name ORDER BY agent_id LIMIT 2;

-- name: ListAgentsWithHost :many
SELECT sqlc.embed(agents), hosts.name AS host_name
FROM agents JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id
WHERE agents.box_id = @box_id
ORDER BY agents.name, agents.agent_id;

-- name: UpdateAgentFlags :one
UPDATE agents
SET enabled = COALESCE(sqlc.narg('enabled')::boolean, enabled),
    listed = COALESCE(sqlc.narg('listed')::boolean, listed)
WHERE box_id = @box_id AND agent_id = @agent_id
RETURNING *;

-- name: SetAgentProfile :one
-- The version moves only when the text does: the same text again supersedes nothing, so no
-- session is sent to re-read it (PROFILE_OUTDATED).
UPDATE agents
SET profile_text = @profile_text,
    profile_version = profile_version + CASE WHEN profile_text = @profile_text THEN 0 ELSE 1 END
WHERE box_id = @box_id AND agent_id = @agent_id
RETURNING profile_text, profile_version;

-- name: GetAgentProfile :one
SELECT profile_text, profile_version FROM agents WHERE box_id = @box_id AND agent_id = @agent_id;
