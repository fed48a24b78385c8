-- name: TakeRateToken :one
-- Refills the key's bucket for the time since its last take (capacity at most), then takes
-- one token if there is one. Clocks of several instances may differ slightly: time never
-- runs backwards for a bucket.
INSERT INTO rate_buckets AS b (box_id, key_id, tokens, updated_at, refused)
VALUES (@box_id, @key_id, sqlc.arg(capacity)::float8 - 1, sqlc.arg(now)::timestamptz, false)
ON CONFLICT (box_id, key_id) DO UPDATE SET
    tokens = CASE
        WHEN LEAST(sqlc.arg(capacity)::float8, b.tokens + GREATEST(0, (extract(epoch FROM sqlc.arg(now)::timestamptz) - extract(epoch FROM b.updated_at))::float8) * sqlc.arg(per_second)::float8) >= 1
        THEN LEAST(sqlc.arg(capacity)::float8, b.tokens + GREATEST(0, (extract(epoch FROM sqlc.arg(now)::timestamptz) - extract(epoch FROM b.updated_at))::float8) * sqlc.arg(per_second)::float8) - 1
        ELSE LEAST(sqlc.arg(capacity)::float8, b.tokens + GREATEST(0, (extract(epoch FROM sqlc.arg(now)::timestamptz) - extract(epoch FROM b.updated_at))::float8) * sqlc.arg(per_second)::float8)
    END,
    refused = LEAST(sqlc.arg(capacity)::float8, b.tokens + GREATEST(0, (extract(epoch FROM sqlc.arg(now)::timestamptz) - extract(epoch FROM b.updated_at))::float8) * sqlc.arg(per_second)::float8) < 1,
    updated_at = GREATEST(b.updated_at, sqlc.arg(now)::timestamptz)
RETURNING tokens, refused;
