-- name: CreateBox :one
INSERT INTO boxes (box_id, box_key, name, created_at)
VALUES (@box_id, @box_key, @name, @now)
ON CONFLICT (box_key) DO NOTHING
RETURNING *;

-- name: GetBoxByKey :one
SELECT * FROM boxes WHERE box_key = @box_key;

-- name: ListBoxes :many
SELECT * FROM boxes ORDER BY box_key;

-- name: UpdateBox :one
UPDATE boxes
SET name = COALESCE(sqlc.narg('name')::text, name),
    enabled = COALESCE(sqlc.narg('enabled')::boolean, enabled)
WHERE box_id = @box_id
RETURNING *;

-- name: LockBoxSettings :one
SELECT settings, settings_revision FROM boxes WHERE box_id = @box_id FOR UPDATE;

-- name: SetBoxSettings :one
UPDATE boxes
SET settings = @settings, settings_revision = settings_revision + 1
WHERE box_id = @box_id
RETURNING settings, settings_revision;
