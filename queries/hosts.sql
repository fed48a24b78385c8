-- name: CreateHost :one
INSERT INTO hosts (box_id, host_id, name, ips, created_at)
VALUES (@box_id, @host_id, @name, @ips, @now)
ON CONFLICT (box_id, name) DO NOTHING
RETURNING *;

-- name: GetHostByName :one
SELECT * FROM hosts WHERE box_id = @box_id AND name = @name;

-- name: ListHosts :many
SELECT * FROM hosts WHERE box_id = @box_id ORDER BY name;

-- name: SetHostIPs :one
UPDATE hosts SET ips = @ips WHERE box_id = @box_id AND name = @name RETURNING *;
