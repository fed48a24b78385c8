-- name: LockIdempotencyKey :exec
-- Serializes concurrent calls that share one idempotency key (until commit).
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg(scope)::text, 0));

-- name: GetIdempotencyRecord :one
-- The record by its key (OFFSET 0 keeps the expiry out of the lookup: as an index condition
-- it made the box's expiry index, walked from now, look as cheap as the key for a new box).
WITH record AS (
    SELECT request_hash, response, expires_at FROM idempotency_records
    WHERE box_id = @box_id AND agent_id = @agent_id AND tool = @tool AND idem_key = @idem_key
    OFFSET 0
)
SELECT request_hash, response FROM record WHERE expires_at > @now;

-- name: PutIdempotencyRecord :exec
INSERT INTO idempotency_records (box_id, agent_id, tool, idem_key, request_hash, response, created_at, expires_at)
VALUES (@box_id, @agent_id, @tool, @idem_key, @request_hash, @response, @now, @expires_at)
ON CONFLICT (box_id, agent_id, tool, idem_key)
DO UPDATE SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
              created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at;

-- name: DeleteExpiredIdempotencyRecords :execrows
DELETE FROM idempotency_records WHERE box_id = @box_id AND expires_at <= @now;
