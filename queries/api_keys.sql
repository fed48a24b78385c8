-- name: CreateAPIKey :one
INSERT INTO api_keys (box_id, key_id, agent_id, key_hash, router, created_at)
VALUES (@box_id, @key_id, @agent_id, @key_hash, @router, @now)
RETURNING *;

-- name: ListAPIKeys :many
SELECT * FROM api_keys WHERE box_id = @box_id AND agent_id = @agent_id ORDER BY created_at, key_id;

-- name: RevokeAPIKey :one
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, @now)
WHERE box_id = @box_id AND key_id = @key_id
RETURNING *;

-- name: AuthenticateKey :one
-- Everything agent authentication checks, in one round trip. The caller decides. The key is
-- found first, by its unique (box, hash) — MATERIALIZED, because with the owner columns'
-- statistics off (0010_inbox_paths.sql) the planner may otherwise join the box to all of
-- its agents and probe each one's keys (640 agents: 1,945 buffers instead of 8).
WITH k AS MATERIALIZED (
    SELECT boxes.box_id, boxes.box_key, boxes.enabled, boxes.settings,
           api_keys.key_id, api_keys.agent_id, api_keys.router, api_keys.revoked_at
    FROM boxes JOIN api_keys ON api_keys.box_id = boxes.box_id AND api_keys.key_hash = @key_hash
    WHERE boxes.box_key = @box_key
)
SELECT k.box_id, k.box_key, k.enabled AS box_enabled,
       k.key_id, k.router, k.revoked_at,
       agents.agent_id, agents.name AS agent_name, agents.enabled AS agent_enabled,
       hosts.host_id, hosts.name AS host_name, hosts.ips, k.settings AS box_settings
FROM k
JOIN agents ON agents.box_id = k.box_id AND agents.agent_id = k.agent_id
JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id;

-- name: CreateAdminToken :one
INSERT INTO admin_tokens (token_id, token_hash, label, created_at)
VALUES (@token_id, @token_hash, @label, @now)
RETURNING token_id, label, created_at;

-- name: AdminTokenLive :one
SELECT EXISTS (SELECT 1 FROM admin_tokens WHERE token_hash = @token_hash AND revoked_at IS NULL);

-- name: ListAdminTokens :many
-- Every issued admin token (never its hash), oldest first.
SELECT token_id, label, created_at, revoked_at FROM admin_tokens ORDER BY created_at, token_id;

-- name: RevokeAdminToken :one
UPDATE admin_tokens SET revoked_at = COALESCE(revoked_at, @now)
WHERE token_id = @token_id
RETURNING token_id, label, created_at, revoked_at;

-- name: AuthenticateKeyAnyBox :many
-- The same facts as AuthenticateKey, found by the key hash alone (the MCP endpoint learns
-- the box only per tool call). A key hash is unique in practice; the caller requires one row.
-- The keys come first (MATERIALIZED), as in AuthenticateKey.
WITH k AS MATERIALIZED (
    SELECT api_keys.box_id, api_keys.key_id, api_keys.agent_id, api_keys.router, api_keys.revoked_at
    FROM api_keys WHERE api_keys.key_hash = @key_hash
    LIMIT 2
)
SELECT boxes.box_id, boxes.box_key, boxes.enabled AS box_enabled,
       k.key_id, k.router, k.revoked_at,
       agents.agent_id, agents.name AS agent_name, agents.enabled AS agent_enabled,
       hosts.host_id, hosts.name AS host_name, hosts.ips, boxes.settings AS box_settings
FROM k
JOIN boxes ON boxes.box_id = k.box_id
JOIN agents ON agents.box_id = k.box_id AND agents.agent_id = k.agent_id
JOIN hosts ON hosts.box_id = agents.box_id AND hosts.host_id = agents.host_id;
