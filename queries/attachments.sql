-- Uploaded attachments (SPEC §6): metadata rows per message copy, bytes in chunk rows
-- (the attachment_chunks migration). The chunks of a send's first copy are streamed in by
-- store.DeliverMessages; every further copy of a batch DM gets its own chunks copied on the
-- server, so each copy is owned by its own message.

-- name: InsertAttachments :exec
-- One attachment row per message copy, with the shared metadata.
INSERT INTO attachments (box_id, message_id, attachment_id, name, media_type, size_bytes, sha256)
SELECT @box_id, c.message_id, c.attachment_id, @att_name::text, @media_type::text, @size_bytes::bigint, @sha256::text
FROM (SELECT unnest(@message_ids::uuid[]) AS message_id, unnest(@attachment_ids::uuid[]) AS attachment_id) AS c;

-- name: CopyAttachmentChunks :exec
-- Gives each target attachment its own copy of the source attachment's chunks.
INSERT INTO attachment_chunks (box_id, attachment_id, chunk_index, data)
SELECT @box_id, t.attachment_id, c.chunk_index, c.data
FROM attachment_chunks c CROSS JOIN unnest(@target_ids::uuid[]) AS t(attachment_id)
WHERE c.box_id = @box_id AND c.attachment_id = @source_id;

-- name: AttachmentMessage :one
-- The message an attachment belongs to (authorization is the caller's).
SELECT message_id FROM attachments WHERE box_id = @box_id AND attachment_id = @attachment_id;

-- name: AttachmentChunks :many
-- A window of an attachment's chunks in order: at most @max_chunks from chunk_index @from_index.
SELECT chunk_index, data FROM attachment_chunks
WHERE box_id = @box_id AND attachment_id = @attachment_id AND chunk_index >= @from_index::integer
ORDER BY chunk_index
LIMIT @max_chunks;

-- name: DeleteOversizedAttachmentMessages :one
-- Retroactive attachment_max_bytes (SPEC §11): in the given channels (locked by the caller),
-- every message whose attachment is larger than @max_bytes is deleted whole (cascading to its
-- attachment, requests and file reports; its attention rows, with their receipts and leases,
-- and the duplicate reference are deleted explicitly), and the channels' counts and the
-- recipients' delivered counters (0015_inbox_counts.sql) are decreased
-- by what was deleted.
WITH victims AS MATERIALIZED (
    SELECT a.message_id FROM attachments a
    JOIN messages m ON m.box_id = a.box_id AND m.message_id = a.message_id
    -- has_attachment puts the channels' attachment-message index in reach: without it the
    -- victims were found by walking every message of the channels (45,324 buffers for a
    -- channel of 20,000 messages; 12,266 with it, of which 4,000 carry attachments).
    WHERE a.box_id = @box_id AND m.channel_id = ANY(@channel_ids::uuid[]) AND m.has_attachment
      AND a.size_bytes > @max_bytes::bigint
), deleted AS (
    DELETE FROM messages
    WHERE messages.box_id = @box_id AND messages.message_id IN (SELECT message_id FROM victims)
    RETURNING messages.channel_id, messages.has_attachment
), dropped_attention AS (
    -- Attention rows have no foreign key to their message (0011): they go here (leases are
    -- columns of the rows), and so do their receipts, which have none to the rows (0013).
    DELETE FROM attention a
    WHERE a.box_id = @box_id AND a.message_id IN (SELECT message_id FROM victims)
    RETURNING a.agent_id, a.inbox_seq, a.channel_id, a.acked_at
), dropped_receipts AS (
    DELETE FROM receipts r
    USING dropped_attention d
    WHERE r.box_id = @box_id AND r.agent_id = d.agent_id AND r.inbox_seq = d.inbox_seq
), uncounted AS (
    -- An unread row deleted leaves its delivered counter (0015_inbox_counts.sql).
    UPDATE inbox_delivered SET n = inbox_delivered.n - d.n
    FROM (SELECT agent_id, channel_id, count(*) AS n FROM dropped_attention WHERE acked_at IS NULL
          GROUP BY agent_id, channel_id) AS d
    WHERE inbox_delivered.box_id = @box_id AND inbox_delivered.agent_id = d.agent_id AND inbox_delivered.channel_id = d.channel_id
), dropped_references AS (
    -- The duplicate reference has no foreign key (the inbox_paths migration): it goes here.
    DELETE FROM channel_sender_latest l
    WHERE l.box_id = @box_id AND l.channel_id = ANY(@channel_ids::uuid[])
      AND l.message_id IN (SELECT message_id FROM victims)
), counted AS (
    UPDATE channels SET message_count = channels.message_count - d.n,
                        attachment_message_count = channels.attachment_message_count - d.a
    FROM (SELECT channel_id, count(*) AS n, count(*) FILTER (WHERE has_attachment) AS a
          FROM deleted GROUP BY channel_id) AS d
    WHERE channels.box_id = @box_id AND channels.channel_id = d.channel_id
)
SELECT count(*)::bigint FROM deleted;
