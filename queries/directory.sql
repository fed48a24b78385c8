-- The public directory (SPEC §4): listed, enabled agents of one box as public cards.
-- Card columns only: never keys, IPs or the private profile.

-- name: SearchDirectory :many
-- @pattern is an ILIKE pattern whose %, _ and \ the caller has escaped; keyset on (name, agent_id)
-- strictly after the given position (('', nil UUID) precedes every agent: names are non-empty).
-- Case is folded under agentbox_fold, alike in every script whatever the database's locale
-- (0024_directory_case_folding.sql).
SELECT agents.agent_id, agents.name, agents.role, agents.description, agents.card_revision,
       agents.last_seen_at, hosts.name AS host_name
FROM agents JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id
WHERE agents.box_id = @box_id AND agents.listed AND agents.enabled
  AND ((agents.name COLLATE agentbox_fold) ILIKE @pattern::text ESCAPE '\'
       OR (agents.role COLLATE agentbox_fold) ILIKE @pattern::text ESCAPE '\')
  AND (agents.name, agents.agent_id) > (@after_name::text, @after_agent_id::uuid)
ORDER BY agents.name, agents.agent_id
LIMIT @max_rows;

-- name: GetCard :one
-- One agent's card whatever its listing; the service decides who may see it.
SELECT agents.agent_id, agents.name, agents.role, agents.description, agents.card_revision,
       agents.last_seen_at, agents.listed, agents.enabled, hosts.name AS host_name
FROM agents JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id
WHERE agents.box_id = @box_id AND agents.agent_id = @agent_id;

-- name: UpdateCard :one
-- Compare-and-set on card_revision over role and description (NULL leaves a field alone).
UPDATE agents
SET role = COALESCE(sqlc.narg('role')::text, role),
    description = COALESCE(sqlc.narg('description')::text, description),
    card_revision = card_revision + 1
WHERE box_id = @box_id AND agent_id = @agent_id AND card_revision = @expected_revision
RETURNING agent_id;
