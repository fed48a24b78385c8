-- name: OpenSession :one
-- Creates the session on first prime; priming again returns the same row. Priming is a call
-- like any other: it records the coarse last_seen_at observation as GetSession does (an agent
-- that only primed, or was just primed, was seen).
WITH due AS (
    SELECT agents.box_id, agents.agent_id FROM agents
    WHERE agents.box_id = @box_id AND agents.agent_id = @agent_id
      AND (agents.last_seen_at IS NULL OR agents.last_seen_at < sqlc.arg(stale_before)::timestamptz)
    FOR NO KEY UPDATE SKIP LOCKED
), touched AS (
    UPDATE agents SET last_seen_at = @now
    FROM due WHERE agents.box_id = due.box_id AND agents.agent_id = due.agent_id
    RETURNING 1
)
INSERT INTO sessions (box_id, session_id, agent_id, session_key_hash, observed_profile_version, created_at)
VALUES (@box_id, @session_id, @agent_id, @session_key_hash, @observed_profile_version, @now)
ON CONFLICT (box_id, agent_id, session_key_hash)
DO UPDATE SET observed_profile_version = GREATEST(sessions.observed_profile_version, EXCLUDED.observed_profile_version)
RETURNING session_id, observed_profile_version, (xmax = 0) AS created;

-- name: GetSession :one
-- One round trip per call: the session, the profile version it must have observed, the
-- box settings, and a coarse last_seen_at observation (written at most once a minute). The
-- observation never waits: when another transaction holds the agent's row (another session
-- of the agent writing the same observation, mostly), this call skips it (SKIP LOCKED) —
-- waiting made every concurrent session of one agent queue behind the first one's whole
-- transaction once a minute (47 ms mean for GetSession in W3).
WITH due AS (
    SELECT agents.box_id, agents.agent_id FROM agents
    WHERE agents.box_id = @box_id AND agents.agent_id = @agent_id
      AND (agents.last_seen_at IS NULL OR agents.last_seen_at < sqlc.arg(stale_before)::timestamptz)
    FOR NO KEY UPDATE SKIP LOCKED
), touched AS (
    UPDATE agents SET last_seen_at = sqlc.arg(now)::timestamptz
    FROM due WHERE agents.box_id = due.box_id AND agents.agent_id = due.agent_id
    RETURNING 1
)
SELECT sessions.session_id, sessions.observed_profile_version, agents.profile_version AS current_profile_version,
       boxes.settings, boxes.settings_revision
FROM sessions
JOIN agents ON agents.box_id = sessions.box_id AND agents.agent_id = sessions.agent_id
JOIN boxes ON boxes.box_id = sessions.box_id
WHERE sessions.box_id = @box_id AND sessions.agent_id = @agent_id AND sessions.session_key_hash = @session_key_hash;

-- name: ObserveProfile :exec
UPDATE sessions SET observed_profile_version = GREATEST(observed_profile_version, @profile_version)
WHERE box_id = @box_id AND session_id = @session_id;
