-- name: LockIdempotencyKey :exec
-- Serializes concurrent calls that share one idempotency key (until commit).
SELECT pg_advisory_xact_lock(hashtextextended(sqlc.arg(scope)::text, 0));

-- name: GetIdempotencyRecord :one
-- The record by its key (OFFSET 0 keeps the expiry out of the lookup: as an index condition
-- it made the box's expiry index, walked from now, look as cheap as the key for a new box).
-- created_at lets the caller apply a retention lowered since the record was written.
WITH record AS (
    SELECT request_hash, response, created_at, expires_at FROM idempotency_records
    WHERE box_id = @box_id AND agent_id = @agent_id AND tool = @tool AND idem_key = @idem_key
    OFFSET 0
)
SELECT request_hash, response, created_at FROM record WHERE expires_at > @now;

-- name: PutIdempotencyRecord :exec
INSERT INTO idempotency_records (box_id, agent_id, tool, idem_key, request_hash, response, created_at, expires_at)
VALUES (@box_id, @agent_id, @tool, @idem_key, @request_hash, @response, @now, @expires_at)
ON CONFLICT (box_id, agent_id, tool, idem_key)
DO UPDATE SET request_hash = EXCLUDED.request_hash, response = EXCLUDED.response,
              created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at;

-- name: DeleteExpiredIdempotencyRecords :one
-- One batch of the expiry sweeper (internal/store/idempotency_expiry.go): up to @max_rows of
-- the box's expired records, oldest first, skipping rows another sweeper holds. In a function
-- so that it reads them by the expiry index whatever the estimates (0023_idempotency_expiry.sql).
SELECT idempotency_delete_expired(@box_id, @now::timestamptz, @max_rows::integer)::bigint AS deleted;

-- name: ExpiryBoxes :many
-- The boxes the sweeper visits, @max_rows at a time after @after (by the primary key).
SELECT box_id FROM boxes WHERE box_id > @after::uuid ORDER BY box_id LIMIT @max_rows;
