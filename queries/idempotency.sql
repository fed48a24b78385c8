-- name: LockIdempotencyKey :exec
-- Serializes concurrent calls that share one idempotency key (until commit).
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg(scope)::text, 0));

-- name: GetIdempotencyRecord :one
SELECT request_hash, response FROM idempotency_records
WHERE box_id = @box_id AND agent_id = @agent_id AND tool = @tool AND idem_key = @idem_key
  AND expires_at > @now;

-- name: PutIdempotencyRecord :exec
INSERT INTO idempotency_records (box_id, agent_id, tool, idem_key, request_hash, response, created_at, expires_at)
VALUES (@box_id, @agent_id, @tool, @idem_key, @request_hash, @response, @now, @expires_at)
ON CONFLICT (box_id, agent_id, tool, idem_key)
DO UPDATE SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
              created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at;

-- name: DeleteExpiredIdempotencyRecords :execrows
DELETE FROM idempotency_records WHERE box_id = @box_id AND expires_at <= @now;
