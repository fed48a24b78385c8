-- name: CreateAdminUISession :exec
INSERT INTO admin_ui_sessions (session_hash, token_hash, csrf, created_at, seen_at)
VALUES (@session_hash, @token_hash, @csrf, @now, @now);

-- name: SweepAdminUISessions :exec
DELETE FROM admin_ui_sessions WHERE seen_at < @idle_before OR created_at < @created_before;

-- name: TouchAdminUISession :one
-- A live session (used within the idle timeout, younger than the lifetime) is marked used.
UPDATE admin_ui_sessions SET seen_at = GREATEST(seen_at, @now)
WHERE session_hash = @session_hash AND seen_at >= @idle_before AND created_at >= @created_before
RETURNING token_hash, csrf;

-- name: EndAdminUISession :exec
DELETE FROM admin_ui_sessions WHERE session_hash = @session_hash;

-- name: SetAdminUISessionFlash :exec
UPDATE admin_ui_sessions SET flash = @flash WHERE session_hash = @session_hash;

-- name: TakeAdminUISessionFlash :one
UPDATE admin_ui_sessions s SET flash = ''
FROM (SELECT o.session_hash, o.flash FROM admin_ui_sessions o WHERE o.session_hash = @session_hash FOR UPDATE) old
WHERE s.session_hash = old.session_hash
RETURNING old.flash;
