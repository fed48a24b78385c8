-- name: EnsureServerSecret :exec
INSERT INTO server_secrets (name, secret) VALUES (@name, @secret) ON CONFLICT (name) DO NOTHING;

-- name: GetServerSecret :one
SELECT secret FROM server_secrets WHERE name = @name;
