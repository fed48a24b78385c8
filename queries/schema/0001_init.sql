-- Foundation: tenants (boxes), hosts, agents, API keys, admin tokens, sessions,
-- checkpoints, idempotency records and server secrets.
-- Every table holding box data leads its key with box_id, and every query filters by it,
-- so a deployment can shard by box.

CREATE TABLE boxes (
    box_id            uuid PRIMARY KEY,
    box_key           text NOT NULL UNIQUE,
    name              text NOT NULL DEFAULT '',
    enabled           boolean NOT NULL DEFAULT true,
    -- Only the keys an admin has set; defaults are applied in code.
    settings          jsonb NOT NULL DEFAULT '{}'::jsonb,
    settings_revision bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL
);

CREATE TABLE hosts (
    box_id     uuid NOT NULL REFERENCES boxes (box_id),
    host_id    uuid NOT NULL,
    name       text NOT NULL,
    -- Exact, normalized source IPs (IPv4-mapped IPv6 stored as IPv4).
    ips        text[] NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (box_id, host_id),
    UNIQUE (box_id, name)
);

CREATE TABLE agents (
    box_id          uuid NOT NULL,
    agent_id        uuid NOT NULL,
    host_id         uuid NOT NULL,
    name            text NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    listed          boolean NOT NULL DEFAULT false,
    role            text NOT NULL DEFAULT '',
    description     text NOT NULL DEFAULT '',
    card_revision   bigint NOT NULL DEFAULT 1,
    profile_text    text NOT NULL DEFAULT '',
    profile_version bigint NOT NULL DEFAULT 1,
    last_seen_at    timestamptz,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (box_id, agent_id),
    UNIQUE (box_id, host_id, name),
    FOREIGN KEY (box_id, host_id) REFERENCES hosts (box_id, host_id)
);
CREATE INDEX agents_box_name ON agents (box_id, name);

CREATE TABLE api_keys (
    box_id     uuid NOT NULL,
    key_id     uuid NOT NULL,
    agent_id   uuid NOT NULL,
    -- SHA-256 of the whole key; the key itself is never stored.
    key_hash   bytea NOT NULL,
    router     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    PRIMARY KEY (box_id, key_id),
    UNIQUE (box_id, key_hash),
    FOREIGN KEY (box_id, agent_id) REFERENCES agents (box_id, agent_id)
);

CREATE TABLE admin_tokens (
    token_id   uuid PRIMARY KEY,
    token_hash bytea NOT NULL UNIQUE,
    label      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE TABLE sessions (
    box_id                   uuid NOT NULL,
    session_id               uuid NOT NULL,
    agent_id                 uuid NOT NULL,
    -- SHA-256 of the transport's session key (header, MCP session ID or API key ID).
    session_key_hash         bytea NOT NULL,
    observed_profile_version bigint NOT NULL,
    created_at               timestamptz NOT NULL,
    PRIMARY KEY (box_id, session_id),
    UNIQUE (box_id, agent_id, session_key_hash),
    FOREIGN KEY (box_id, agent_id) REFERENCES agents (box_id, agent_id)
);

CREATE TABLE checkpoints (
    box_id              uuid NOT NULL,
    agent_id            uuid NOT NULL,
    revision            bigint NOT NULL,
    -- json (not jsonb) keeps the saved text exactly as it was saved.
    body                json NOT NULL,
    saved_at            timestamptz NOT NULL,
    saved_by_session_id uuid NOT NULL,
    profile_version     bigint NOT NULL,
    PRIMARY KEY (box_id, agent_id),
    FOREIGN KEY (box_id, agent_id) REFERENCES agents (box_id, agent_id)
);

CREATE TABLE idempotency_records (
    box_id       uuid NOT NULL,
    agent_id     uuid NOT NULL,
    tool         text NOT NULL,
    idem_key     text NOT NULL,
    -- SHA-256 of the canonical arguments (without idempotency_key).
    request_hash bytea NOT NULL,
    -- The exact response body that was returned the first time.
    response     bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (box_id, agent_id, tool, idem_key)
);
CREATE INDEX idempotency_records_expiry ON idempotency_records (box_id, expires_at);

-- Secrets shared by every server process on this database (cursor MAC key).
CREATE TABLE server_secrets (
    name   text PRIMARY KEY,
    secret bytea NOT NULL
);
