-- Messaging: channels (rooms and DM pairs), rooms and memberships, messages, the
-- duplicate-suppression reference, attention rows (inboxes), receipts, leases, requests,
-- file access reports, attachments and retention bookkeeping.
--
-- Ordering rules (SPEC §7, §9): a send locks its channel row first, then the inbox heads of
-- its recipients in agent_id order, and holds them to commit. So message_seq values become
-- visible in commit order within a channel, and inbox_seq values within an inbox; readers
-- take channels.last_message_seq / inbox_heads.last_inbox_seq as the upper bound of a page.

CREATE SEQUENCE message_seq_seq AS bigint;

CREATE TABLE channels (
    box_id               uuid NOT NULL REFERENCES boxes (box_id),
    channel_id           uuid NOT NULL,
    kind                 text NOT NULL CHECK (kind IN ('room', 'dm')),
    -- DM pair, ordered (dm_agent_lo < dm_agent_hi); NULL for rooms.
    dm_agent_lo          uuid,
    dm_agent_hi          uuid,
    -- Highest committed message_seq in the channel (0 when none).
    last_message_seq     bigint NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (box_id, channel_id),
    UNIQUE (box_id, dm_agent_lo, dm_agent_hi),
    CHECK ((kind = 'dm') = (dm_agent_lo IS NOT NULL AND dm_agent_hi IS NOT NULL))
);

CREATE TABLE rooms (
    box_id             uuid NOT NULL,
    room_id            uuid NOT NULL,  -- equals channels.channel_id
    name               text NOT NULL,
    owner_agent_id     uuid NOT NULL,
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    history_visibility text NOT NULL DEFAULT 'shared' CHECK (history_visibility IN ('shared', 'joined')),
    default_follow     text NOT NULL DEFAULT 'all' CHECK (default_follow IN ('all', 'mentions', 'replies', 'mute')),
    brief_md           text NOT NULL DEFAULT '',
    brief_revision     bigint NOT NULL DEFAULT 0,
    brief_updated_at   timestamptz,
    created_at         timestamptz NOT NULL,
    PRIMARY KEY (box_id, room_id),
    FOREIGN KEY (box_id, room_id) REFERENCES channels (box_id, channel_id)
);

CREATE TABLE room_members (
    box_id           uuid NOT NULL,
    room_id          uuid NOT NULL,
    agent_id         uuid NOT NULL,
    state            text NOT NULL CHECK (state IN ('invited', 'active', 'left')),
    -- Incremented at every join; the current epoch is the one reads are authorized for.
    epoch            bigint NOT NULL DEFAULT 0,
    -- channels.last_message_seq when the current epoch began: with history_visibility
    -- 'joined' the member reads only messages above it.
    epoch_start_seq  bigint NOT NULL DEFAULT 0,
    follow           text NOT NULL DEFAULT 'all' CHECK (follow IN ('all', 'mentions', 'replies', 'mute')),
    follow_revision  bigint NOT NULL DEFAULT 1,
    inviter_agent_id uuid,
    invited_at       timestamptz,
    joined_at        timestamptz,
    left_at          timestamptz,
    PRIMARY KEY (box_id, room_id, agent_id),
    FOREIGN KEY (box_id, room_id) REFERENCES rooms (box_id, room_id),
    FOREIGN KEY (box_id, agent_id) REFERENCES agents (box_id, agent_id)
);
CREATE INDEX room_members_by_agent ON room_members (box_id, agent_id, room_id);

CREATE TABLE messages (
    box_id              uuid NOT NULL,
    message_id          uuid NOT NULL,
    message_seq         bigint NOT NULL,
    channel_id          uuid NOT NULL,
    sender_agent_id     uuid NOT NULL,
    -- The destination as sent: 'dm' with recipient, or 'room' with room_id.
    dest_kind           text NOT NULL CHECK (dest_kind IN ('dm', 'room')),
    dest_agent_id       uuid,
    dest_room_id        uuid,
    body_md             text NOT NULL,
    -- json keeps the payload text exactly as accepted (compact).
    payload             json,
    mention_agent_ids   uuid[] NOT NULL DEFAULT '{}',
    request_agent_ids   uuid[] NOT NULL DEFAULT '{}',
    reply_to_message_id uuid,
    reply_to_author_id  uuid,
    thread_root_id      uuid NOT NULL,
    files               jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- SHA-256 over body, payload, file references and attachment metadata: the
    -- consecutive-duplicate comparison key.
    content_hash        bytea NOT NULL,
    has_attachment      boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL,
    PRIMARY KEY (box_id, message_id),
    UNIQUE (box_id, channel_id, message_seq),
    FOREIGN KEY (box_id, channel_id) REFERENCES channels (box_id, channel_id)
);
CREATE INDEX messages_thread ON messages (box_id, thread_root_id, message_seq);
CREATE INDEX messages_with_attachment ON messages (box_id, channel_id, message_seq) WHERE has_attachment;

-- The sender's latest accepted message per channel, the only comparison target of duplicate
-- suppression. It is deleted with its message: no fallback to an older one.
CREATE TABLE channel_sender_latest (
    box_id          uuid NOT NULL,
    channel_id      uuid NOT NULL,
    sender_agent_id uuid NOT NULL,
    message_id      uuid NOT NULL,
    content_hash    bytea NOT NULL,
    PRIMARY KEY (box_id, channel_id, sender_agent_id),
    FOREIGN KEY (box_id, message_id) REFERENCES messages (box_id, message_id) ON DELETE CASCADE
);
CREATE INDEX channel_sender_latest_message ON channel_sender_latest (box_id, message_id);

CREATE TABLE attachments (
    box_id        uuid NOT NULL,
    message_id    uuid NOT NULL,
    attachment_id uuid NOT NULL,
    name          text NOT NULL,
    media_type    text NOT NULL,
    size_bytes    bigint NOT NULL,
    sha256        text NOT NULL,
    content       bytea NOT NULL,
    PRIMARY KEY (box_id, message_id),
    UNIQUE (box_id, attachment_id),
    FOREIGN KEY (box_id, message_id) REFERENCES messages (box_id, message_id) ON DELETE CASCADE
);

-- Per-agent inbox stream head; locked by sends (in agent_id order) to allocate inbox_seq.
CREATE TABLE inbox_heads (
    box_id         uuid NOT NULL,
    agent_id       uuid NOT NULL,
    last_inbox_seq bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (box_id, agent_id),
    FOREIGN KEY (box_id, agent_id) REFERENCES agents (box_id, agent_id)
);

-- One attention row per (recipient, message): the inbox.
CREATE TABLE attention (
    box_id              uuid NOT NULL,
    agent_id            uuid NOT NULL,
    inbox_seq           bigint NOT NULL,
    message_id          uuid NOT NULL,
    channel_id          uuid NOT NULL,
    reasons             integer NOT NULL CHECK (reasons > 0),
    acked_at            timestamptz,
    acked_by_session_id uuid,
    lease_session_id    uuid,
    lease_expires_at    timestamptz,
    PRIMARY KEY (box_id, agent_id, inbox_seq),
    UNIQUE (box_id, agent_id, message_id),
    FOREIGN KEY (box_id, message_id) REFERENCES messages (box_id, message_id) ON DELETE CASCADE
);
CREATE INDEX attention_unread ON attention (box_id, agent_id, inbox_seq) WHERE acked_at IS NULL;
CREATE INDEX attention_by_message ON attention (box_id, message_id);
CREATE INDEX attention_by_channel ON attention (box_id, agent_id, channel_id, inbox_seq);

-- A receipt: this session was shown this attention row (the precondition of its ACK).
CREATE TABLE receipts (
    box_id     uuid NOT NULL,
    agent_id   uuid NOT NULL,
    inbox_seq  bigint NOT NULL,
    session_id uuid NOT NULL,
    PRIMARY KEY (box_id, agent_id, inbox_seq, session_id),
    FOREIGN KEY (box_id, agent_id, inbox_seq) REFERENCES attention (box_id, agent_id, inbox_seq) ON DELETE CASCADE
);

-- One request per (request message, recipient).
CREATE TABLE requests (
    box_id             uuid NOT NULL,
    message_id         uuid NOT NULL,
    recipient_agent_id uuid NOT NULL,
    message_seq        bigint NOT NULL,
    requester_agent_id uuid NOT NULL,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'accepted', 'needs_context', 'declined', 'result_ready')),
    revision           bigint NOT NULL DEFAULT 1,
    updated_at         timestamptz NOT NULL,
    reply_message_id   uuid,
    PRIMARY KEY (box_id, message_id, recipient_agent_id),
    FOREIGN KEY (box_id, message_id) REFERENCES messages (box_id, message_id) ON DELETE CASCADE
);
CREATE INDEX requests_incoming ON requests (box_id, recipient_agent_id, message_seq);
CREATE INDEX requests_outgoing ON requests (box_id, requester_agent_id, message_seq, recipient_agent_id);

CREATE TABLE file_reports (
    box_id            uuid NOT NULL,
    message_id        uuid NOT NULL,
    file_index        integer NOT NULL,
    reporter_agent_id uuid NOT NULL,
    status            text NOT NULL CHECK (status IN ('accessible', 'denied', 'not_found', 'error')),
    note              text NOT NULL DEFAULT '',
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (box_id, message_id, file_index, reporter_agent_id),
    FOREIGN KEY (box_id, message_id) REFERENCES messages (box_id, message_id) ON DELETE CASCADE
);

-- Retention cleanup health per box (admin API).
CREATE TABLE cleanup_status (
    box_id           uuid PRIMARY KEY REFERENCES boxes (box_id),
    state            text NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'running', 'failed')),
    runs             bigint NOT NULL DEFAULT 0,
    deleted_messages bigint NOT NULL DEFAULT 0,
    failures         bigint NOT NULL DEFAULT 0,
    last_run_at      timestamptz,
    last_error       text
);
