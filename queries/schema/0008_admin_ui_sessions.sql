-- Admin web UI sessions (SPEC §13.5), in PostgreSQL so that every server instance serves a
-- signed-in browser. The cookie holds a random session ID; only its SHA-256 is stored, with
-- the SHA-256 of the admin token it signed in with (checked again on every request, so a
-- revoked token ends its sessions), never the token itself.
CREATE TABLE admin_ui_sessions (
    session_hash bytea PRIMARY KEY,
    token_hash   bytea NOT NULL,
    csrf         text NOT NULL,
    created_at   timestamptz NOT NULL,
    seen_at      timestamptz NOT NULL,
    flash        text NOT NULL DEFAULT ''
);
CREATE INDEX admin_ui_sessions_seen ON admin_ui_sessions (seen_at);
