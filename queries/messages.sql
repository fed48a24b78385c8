-- Messages (SPEC §6, §7, §11). A send runs, in one transaction and after its channel lock:
-- SenderLatest (duplicate check), InsertMessages, InsertAttention, EnforceRetention — a fixed
-- number of statements whatever the room size or batch width.

-- name: SenderLatest :many
-- The sender's latest retained message in each given channel: the only comparison target of
-- consecutive-duplicate suppression. Read after the channel lock, so it is current.
SELECT l.channel_id, l.content_hash, m.message_id, m.message_seq, m.created_at
FROM channel_sender_latest l
JOIN messages m ON m.box_id = l.box_id AND m.message_id = l.message_id
WHERE l.box_id = @box_id AND l.sender_agent_id = @sender_agent_id AND l.channel_id = ANY(@channel_ids::uuid[]);

-- name: InsertMessages :many
-- Stores one message per copy (one for a send, one per recipient for a batch) with shared
-- content, takes each message_seq from the global sequence (the caller holds the channel
-- locks, so values become visible in commit order per channel), makes each the sender's
-- duplicate reference in its channel, advances the channels' heads and creates one pending
-- request per requested agent. Absent destinations are passed as the nil UUID.
WITH copies AS (
    SELECT c.message_id, c.channel_id,
           NULLIF(c.dest_agent_id, '00000000-0000-0000-0000-000000000000'::uuid) AS dest_agent_id,
           NULLIF(c.dest_room_id, '00000000-0000-0000-0000-000000000000'::uuid) AS dest_room_id,
           nextval('message_seq_seq') AS message_seq
    FROM (SELECT unnest(@message_ids::uuid[]) AS message_id, unnest(@channel_ids::uuid[]) AS channel_id,
                 unnest(@dest_agent_ids::uuid[]) AS dest_agent_id, unnest(@dest_room_ids::uuid[]) AS dest_room_id) AS c
), inserted AS (
    INSERT INTO messages (box_id, message_id, message_seq, channel_id, sender_agent_id, dest_kind,
                          dest_agent_id, dest_room_id, body_md, payload, mention_agent_ids, request_agent_ids,
                          reply_to_message_id, reply_to_author_id, thread_root_id, files, content_hash,
                          has_attachment, created_at)
    SELECT @box_id, message_id, message_seq, channel_id, @sender_agent_id, @dest_kind,
           dest_agent_id, dest_room_id, @body_md, sqlc.narg(payload)::json, @mention_agent_ids::uuid[],
           @request_agent_ids::uuid[], sqlc.narg(reply_to_message_id)::uuid, sqlc.narg(reply_to_author_id)::uuid,
           COALESCE(sqlc.narg(thread_root_id)::uuid, message_id), @files::jsonb, @content_hash, false, @now
    FROM copies
    RETURNING message_id, message_seq, channel_id, created_at
), latest AS (
    INSERT INTO channel_sender_latest (box_id, channel_id, sender_agent_id, message_id, content_hash)
    SELECT @box_id, channel_id, @sender_agent_id, message_id, @content_hash FROM inserted
    ON CONFLICT (box_id, channel_id, sender_agent_id)
    DO UPDATE SET message_id = EXCLUDED.message_id, content_hash = EXCLUDED.content_hash
), heads AS (
    UPDATE channels SET last_message_seq = inserted.message_seq
    FROM inserted
    WHERE channels.box_id = @box_id AND channels.channel_id = inserted.channel_id
), reqs AS (
    INSERT INTO requests (box_id, message_id, recipient_agent_id, message_seq, requester_agent_id, status, revision, updated_at)
    SELECT @box_id, inserted.message_id, r.agent_id, inserted.message_seq, @sender_agent_id, 'pending', 1, @now
    FROM inserted CROSS JOIN unnest(@request_agent_ids::uuid[]) AS r(agent_id)
)
SELECT message_id, message_seq, channel_id, created_at FROM inserted;

-- name: InsertAttention :execrows
-- One attention row per (recipient, message) with the OR of the reason bits of SPEC §7, for
-- every copy of a send in one statement. DM: the recipient, preferences ignored (1, +4
-- mention, +8 reply to their message, +16 request). Room: every active member but the author,
-- by the preference of their current epoch: all admits 2,4,8,16; mentions 4,8,16; replies
-- 8,16; mute nothing. No row without a reason. inbox_seq comes from each recipient's inbox
-- head, locked (upserted) in agent_id order and held to commit, so inbox_seq values become
-- visible in commit order per inbox and concurrent sends cannot deadlock on heads.
WITH sent AS (
    SELECT s.message_id, s.channel_id, s.dm_recipient_id
    FROM (SELECT unnest(@message_ids::uuid[]) AS message_id, unnest(@channel_ids::uuid[]) AS channel_id,
                 unnest(@dm_recipient_ids::uuid[]) AS dm_recipient_id) AS s
), candidates AS (
    SELECT sent.message_id, sent.channel_id, sent.dm_recipient_id AS agent_id, 'dm'::text AS follow
    FROM sent WHERE @dest_kind::text = 'dm'
    UNION ALL
    SELECT sent.message_id, sent.channel_id, rm.agent_id, rm.follow
    FROM sent
    JOIN room_members rm ON rm.box_id = @box_id AND rm.room_id = sent.channel_id AND rm.state = 'active'
    WHERE @dest_kind::text = 'room' AND rm.agent_id <> @sender_agent_id::uuid
), reasoned AS (
    SELECT message_id, channel_id, agent_id,
           (CASE WHEN follow = 'dm' THEN 1 ELSE 0 END)
         | (CASE WHEN follow = 'all' THEN 2 ELSE 0 END)
         | (CASE WHEN follow IN ('dm', 'all', 'mentions') AND agent_id = ANY(@mention_agent_ids::uuid[]) THEN 4 ELSE 0 END)
         | (CASE WHEN follow <> 'mute' AND agent_id = sqlc.narg(reply_to_author_id)::uuid THEN 8 ELSE 0 END)
         | (CASE WHEN follow <> 'mute' AND agent_id = ANY(@request_agent_ids::uuid[]) THEN 16 ELSE 0 END) AS reasons
    FROM candidates
), heads AS (
    INSERT INTO inbox_heads (box_id, agent_id, last_inbox_seq)
    SELECT @box_id, agent_id, 1 FROM reasoned WHERE reasons > 0 ORDER BY agent_id
    ON CONFLICT (box_id, agent_id) DO UPDATE SET last_inbox_seq = inbox_heads.last_inbox_seq + 1
    RETURNING agent_id, last_inbox_seq
)
INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons)
SELECT @box_id, heads.agent_id, heads.last_inbox_seq, reasoned.message_id, reasoned.channel_id, reasoned.reasons
FROM heads JOIN reasoned ON reasoned.agent_id = heads.agent_id AND reasoned.reasons > 0;

-- name: EnforceRetention :execrows
-- SPEC §11: each given channel keeps its newest @message_cap messages and at most
-- @attachment_cap messages with attachments; older ones are deleted, oldest first. Each bound
-- is the newest message_seq past its cap, found on the channel's message_seq index (the
-- bounds are materialized so they are computed once per channel, not per candidate row);
-- the victims are index ranges below the bounds. Deletes cascade to attachments, attention
-- rows (and so receipts and leases), requests, file reports and the duplicate reference.
-- Run after every write, inside its transaction.
WITH bounds AS MATERIALIZED (
    SELECT ch.channel_id,
           (SELECT m.message_seq FROM messages m
            WHERE m.box_id = @box_id AND m.channel_id = ch.channel_id
            ORDER BY m.message_seq DESC OFFSET @message_cap::bigint LIMIT 1) AS message_bound,
           (SELECT m.message_seq FROM messages m
            WHERE m.box_id = @box_id AND m.channel_id = ch.channel_id AND m.has_attachment
            ORDER BY m.message_seq DESC OFFSET @attachment_cap::bigint LIMIT 1) AS attachment_bound
    FROM unnest(@channel_ids::uuid[]) AS ch(channel_id)
), victims AS MATERIALIZED (
    SELECT m.message_id FROM bounds
    JOIN messages m ON m.box_id = @box_id AND m.channel_id = bounds.channel_id AND m.message_seq <= bounds.message_bound
    UNION
    SELECT m.message_id FROM bounds
    JOIN messages m ON m.box_id = @box_id AND m.channel_id = bounds.channel_id AND m.has_attachment
                   AND m.message_seq <= bounds.attachment_bound
)
DELETE FROM messages
WHERE messages.box_id = @box_id AND messages.message_id IN (SELECT message_id FROM victims);

-- name: GetMessage :one
-- One message with its sender's name and attachment metadata (authorization is the caller's).
SELECT sqlc.embed(m), a.name AS sender_name,
       att.attachment_id, att.name AS attachment_name, att.media_type AS attachment_media_type,
       att.size_bytes AS attachment_size_bytes, att.sha256 AS attachment_sha256
FROM messages m
JOIN agents a ON a.box_id = m.box_id AND a.agent_id = m.sender_agent_id
LEFT JOIN attachments att ON att.box_id = m.box_id AND att.message_id = m.message_id
WHERE m.box_id = @box_id AND m.message_id = @message_id;

-- name: ChannelMessages :many
-- A keyset page of a channel's stream: message_seq in (@after, @upper], ascending, on the
-- (box_id, channel_id, message_seq) index, so a read costs O(page) however long the channel.
SELECT sqlc.embed(m), a.name AS sender_name,
       att.attachment_id, att.name AS attachment_name, att.media_type AS attachment_media_type,
       att.size_bytes AS attachment_size_bytes, att.sha256 AS attachment_sha256
FROM messages m
JOIN agents a ON a.box_id = m.box_id AND a.agent_id = m.sender_agent_id
LEFT JOIN attachments att ON att.box_id = m.box_id AND att.message_id = m.message_id
WHERE m.box_id = @box_id AND m.channel_id = @channel_id
  AND m.message_seq > @after AND m.message_seq <= @upper
ORDER BY m.message_seq
LIMIT @max_rows;

-- name: ThreadMessages :many
-- A keyset page of a thread family (root and replies share thread_root_id and stay in one
-- channel): message_seq in (@after, @upper], ascending, on the messages_thread index.
SELECT sqlc.embed(m), a.name AS sender_name,
       att.attachment_id, att.name AS attachment_name, att.media_type AS attachment_media_type,
       att.size_bytes AS attachment_size_bytes, att.sha256 AS attachment_sha256
FROM messages m
JOIN agents a ON a.box_id = m.box_id AND a.agent_id = m.sender_agent_id
LEFT JOIN attachments att ON att.box_id = m.box_id AND att.message_id = m.message_id
WHERE m.box_id = @box_id AND m.thread_root_id = @thread_root_id AND m.channel_id = @channel_id
  AND m.message_seq > @after AND m.message_seq <= @upper
ORDER BY m.message_seq
LIMIT @max_rows;

-- name: VisibleChannelMessageIDs :many
-- Which of the given message IDs still exist in the channel above the reader's floor (used
-- to redact references to ancestors the reader cannot see, or that were purged).
SELECT message_id FROM messages
WHERE box_id = @box_id AND channel_id = @channel_id AND message_id = ANY(@message_ids::uuid[])
  AND message_seq > @floor;

-- name: RecordReceipts :exec
-- A receipt per returned message the reader has an attention row for: this session was shown
-- that row (the precondition of its ACK). Never an ACK.
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
SELECT attention.box_id, attention.agent_id, attention.inbox_seq, @session_id FROM attention
WHERE attention.box_id = @box_id AND attention.agent_id = @agent_id AND attention.message_id = ANY(@message_ids::uuid[])
ON CONFLICT DO NOTHING;
