-- Messages (SPEC §6, §7, §11). A send runs, in one transaction and after its channel lock:
-- SenderLatest (duplicate check), InsertMessages, InsertAttention, and EnforceRetention only
-- when a channel's count exceeds its cap — a fixed number of statements whatever the room
-- size or batch width.

-- Array parameters. A statement driven by unnest(@array) is estimated at the array's real
-- length when planned for its values and at 100 elements as a cached generic plan, so
-- PostgreSQL finds the generic plan dearer and plans the statement again at every execution
-- (SenderLatest: 0.75 ms of planning per send, pg_stat_statements). Reading the array
-- through a scalar subquery, unnest((SELECT @array)), hides its length from both plans
-- alike, and the generic plan is kept (TestPlansForNewBox checks it).

-- name: SenderLatest :many
-- The sender's latest retained message in each given channel: the only comparison target of
-- consecutive-duplicate suppression. Read after the channel lock, so it is current.
-- One lookup by the full key per channel (LATERAL, OFFSET 0): with `channel_id = ANY(...)` a
-- new sender, estimated at a row or two, would be found by walking the box's references.
SELECT l.channel_id, l.content_hash, m.message_id, m.message_seq, m.created_at
FROM unnest((SELECT @channel_ids::uuid[])) AS c(channel_id)
CROSS JOIN LATERAL (SELECT channel_sender_latest.channel_id, channel_sender_latest.message_id, channel_sender_latest.content_hash
                    FROM channel_sender_latest
                    WHERE channel_sender_latest.box_id = @box_id AND channel_sender_latest.channel_id = c.channel_id
                      AND channel_sender_latest.sender_agent_id = @sender_agent_id
                    OFFSET 0) AS l
JOIN messages m ON m.box_id = @box_id AND m.message_id = l.message_id;

-- name: DMSenderLatest :many
-- SenderLatest in the DM channel of one pair (@lo < @hi), found by the pair: a DM reads it in
-- the round trip that locks the channel, before it knows the channel's ID.
-- (The reference by its full key, once: see SenderLatest.)
SELECT l.channel_id, l.content_hash, m.message_id, m.message_seq, m.created_at
FROM channels c
CROSS JOIN LATERAL (SELECT channel_sender_latest.channel_id, channel_sender_latest.message_id, channel_sender_latest.content_hash
                    FROM channel_sender_latest
                    WHERE channel_sender_latest.box_id = c.box_id AND channel_sender_latest.channel_id = c.channel_id
                      AND channel_sender_latest.sender_agent_id = @sender_agent_id
                    OFFSET 0) AS l
JOIN messages m ON m.box_id = c.box_id AND m.message_id = l.message_id
WHERE c.box_id = @box_id AND c.kind = 'dm' AND c.dm_agent_lo = @lo AND c.dm_agent_hi = @hi;

-- name: InsertMessages :many
-- Stores one message per copy (one for a send, one per recipient for a batch) with shared
-- content, takes each message_seq from the box's sequence (0025_box_sequences.sql; the caller holds the channel
-- locks, so values become visible in commit order per channel; a dry run draws from
-- dry_run_seq, 0022_dry_run_sequence.sql), makes each the sender's
-- duplicate reference in its channel, advances the channels' heads and message counts and
-- creates one pending request per requested agent. Returns each copy with its channel's new
-- counts (retention runs only when one exceeds its cap). Absent destinations are passed as
-- the nil UUID.
WITH copies AS (
    SELECT c.message_id, c.channel_id,
           NULLIF(c.dest_agent_id, '00000000-0000-0000-0000-000000000000'::uuid) AS dest_agent_id,
           NULLIF(c.dest_room_id, '00000000-0000-0000-0000-000000000000'::uuid) AS dest_room_id,
           CASE WHEN @dry_run::boolean THEN nextval('dry_run_seq') ELSE nextval((SELECT box_message_seq(@box_id))) END AS message_seq
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
           COALESCE(sqlc.narg(thread_root_id)::uuid, message_id), @files::jsonb, @content_hash, @has_attachment::boolean, @now
    FROM copies
    RETURNING message_id, message_seq, channel_id, created_at, has_attachment
), latest AS (
    INSERT INTO channel_sender_latest (box_id, channel_id, sender_agent_id, message_id, content_hash)
    SELECT @box_id, channel_id, @sender_agent_id, message_id, @content_hash FROM inserted
    ON CONFLICT (box_id, channel_id, sender_agent_id)
    DO UPDATE SET message_id = EXCLUDED.message_id, content_hash = EXCLUDED.content_hash
), heads AS (
    -- Each channel of the copies by its key, its new head and counts read from its own copies
    -- (a correlated sub-SELECT, not a join: a join of the channels with the copies aggregated
    -- by channel was planned as a hash aggregate and a hash join, built at every send for a
    -- row or two).
    UPDATE channels SET (last_message_seq, message_count, attachment_message_count) =
        (SELECT max(i.message_seq), channels.message_count + count(*),
                channels.attachment_message_count + count(*) FILTER (WHERE i.has_attachment)
         FROM inserted i WHERE i.channel_id = channels.channel_id)
    WHERE channels.box_id = @box_id AND channels.channel_id = ANY(@channel_ids::uuid[])
    RETURNING channels.channel_id, channels.message_count, channels.attachment_message_count
), reqs AS (
    INSERT INTO requests (box_id, message_id, recipient_agent_id, message_seq, requester_agent_id, status, revision, updated_at)
    SELECT @box_id, inserted.message_id, r.agent_id, inserted.message_seq, @sender_agent_id, 'pending', 1, @now
    FROM inserted CROSS JOIN unnest(@request_agent_ids::uuid[]) AS r(agent_id)
)
-- Each copy with its channel's counts, looked up per copy (OFFSET 0: no hash join either).
SELECT inserted.message_id, inserted.message_seq, inserted.channel_id, inserted.created_at,
       h.message_count, h.attachment_message_count
FROM inserted
CROSS JOIN LATERAL (SELECT heads.message_count, heads.attachment_message_count FROM heads
                    WHERE heads.channel_id = inserted.channel_id OFFSET 0) AS h;

-- name: InsertAttention :one
-- One attention row per (recipient, message) with the OR of the reason bits of SPEC §7, for
-- every copy of a send in one statement. DM copies (arrays; empty for a room post): the
-- recipient, preferences ignored (1, +4 mention, +8 reply to their message, +16 request). A
-- room post (@room_id and @room_message_id; the nil UUID for DMs): every active member but
-- the author, by the preference of their current epoch: all admits 2,4,8,16; mentions
-- 4,8,16; replies 8,16; mute nothing. No row without a reason. (Scalars for the room and a
-- real value rather than NULL keep the statement's cached generic plan as cheap as a freshly
-- planned one for both kinds of send, so PostgreSQL does not re-plan it at every send.) Each row's inbox_seq (a dry run's: from dry_run_seq) is drawn from the box's sequence only after the
-- shared advisory lock on the recipient's inbox, taken in agent_id order (0006_inbox_seq.sql:
-- inbox_upper then never returns a bound below an uncommitted row, and concurrent sends to
-- one inbox do not wait for each other). Each recipient's delivered counter of the channel
-- (0015_inbox_counts.sql) grows by its rows, in the same statement; the caller holds the
-- channel's lock, which is what serializes the counter's writers. Returns the rows inserted.
WITH candidates AS (
    SELECT d.message_id, d.channel_id, d.agent_id, 'dm'::text AS follow
    FROM (SELECT unnest(@dm_message_ids::uuid[]) AS message_id, unnest(@dm_channel_ids::uuid[]) AS channel_id,
                 unnest(@dm_recipient_ids::uuid[]) AS agent_id) AS d
    UNION ALL
    SELECT @room_message_id::uuid, rm.room_id, rm.agent_id, rm.follow
    FROM room_members rm
    WHERE rm.box_id = @box_id AND rm.room_id = @room_id::uuid AND rm.state = 'active'
      AND rm.agent_id <> @sender_agent_id::uuid
), reasoned AS (
    SELECT message_id, channel_id, agent_id,
           (CASE WHEN follow = 'dm' THEN 1 ELSE 0 END)
         | (CASE WHEN follow = 'all' THEN 2 ELSE 0 END)
         | (CASE WHEN follow IN ('dm', 'all', 'mentions') AND agent_id = ANY(@mention_agent_ids::uuid[]) THEN 4 ELSE 0 END)
         | (CASE WHEN follow <> 'mute' AND agent_id = sqlc.narg(reply_to_author_id)::uuid THEN 8 ELSE 0 END)
         | (CASE WHEN follow <> 'mute' AND agent_id = ANY(@request_agent_ids::uuid[]) THEN 16 ELSE 0 END) AS reasons
    FROM candidates
), locked AS MATERIALIZED (
    -- A row leaves this CTE only after its recipient's lock is held, so the nextval below
    -- always follows the lock; the sorted subquery fixes the order the locks are taken in.
    SELECT r.message_id, r.channel_id, r.agent_id, r.reasons,
           pg_advisory_xact_lock_shared(inbox_lock_key(@box_id, r.agent_id)) AS locked
    FROM (SELECT * FROM reasoned WHERE reasons > 0 ORDER BY agent_id, message_id) AS r
), inserted AS (
    INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons)
    SELECT @box_id, agent_id, CASE WHEN @dry_run::boolean THEN nextval('dry_run_seq') ELSE nextval((SELECT box_inbox_seq(@box_id))) END,
           message_id, channel_id, reasons FROM locked
    RETURNING agent_id, channel_id
), counted AS (
    INSERT INTO inbox_delivered AS d (box_id, agent_id, channel_id, n)
    SELECT @box_id, agent_id, channel_id, count(*) FROM inserted GROUP BY agent_id, channel_id
    ON CONFLICT (box_id, agent_id, channel_id) DO UPDATE SET n = d.n + EXCLUDED.n
)
SELECT count(*)::bigint FROM inserted;

-- name: EnforceRetention :one
-- SPEC §11: each given channel keeps its newest @message_cap messages and at most
-- @attachment_cap messages with attachments; older ones are deleted, oldest first. The
-- channels' counts (0005_channel_counts.sql) say how many are in excess, so only channels
-- over a cap are touched and each victim set is an index range from the oldest message, of
-- exactly the excess size. Deletes cascade to attachments, requests and file reports; the
-- attention rows (with their leases), their receipts and the duplicate reference have no
-- foreign key to what they belong to and are deleted explicitly (dropped_attention,
-- dropped_receipts, dropped_references); the channels' counts and the recipients' delivered
-- counters are decreased by what was deleted. The caller holds the channels' locks.
WITH over AS MATERIALIZED (
    SELECT c.channel_id, GREATEST(c.message_count - @message_cap::bigint, 0) AS message_excess,
           GREATEST(c.attachment_message_count - @attachment_cap::bigint, 0) AS attachment_excess
    FROM channels c
    WHERE c.box_id = @box_id AND c.channel_id = ANY(@channel_ids::uuid[])
      AND (c.message_count > @message_cap::bigint OR c.attachment_message_count > @attachment_cap::bigint)
), victims AS MATERIALIZED (
    SELECT v.message_id FROM over CROSS JOIN LATERAL (
        SELECT m.message_id FROM messages m
        WHERE m.box_id = @box_id AND m.channel_id = over.channel_id
        ORDER BY m.message_seq LIMIT over.message_excess) AS v
    UNION
    SELECT v.message_id FROM over CROSS JOIN LATERAL (
        SELECT m.message_id FROM messages m
        WHERE m.box_id = @box_id AND m.channel_id = over.channel_id AND m.has_attachment
        ORDER BY m.message_seq LIMIT over.attachment_excess) AS v
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
    WHERE l.box_id = @box_id AND l.channel_id IN (SELECT channel_id FROM over)
      AND l.message_id IN (SELECT message_id FROM victims)
), counted AS (
    UPDATE channels SET message_count = channels.message_count - d.n,
                        attachment_message_count = channels.attachment_message_count - d.a
    FROM (SELECT channel_id, count(*) AS n, count(*) FILTER (WHERE has_attachment) AS a
          FROM deleted GROUP BY channel_id) AS d
    WHERE channels.box_id = @box_id AND channels.channel_id = d.channel_id
)
SELECT count(*)::bigint FROM deleted;

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
-- Each message by its key (LATERAL, OFFSET 0), the channel and floor checked on the row: as
-- index conditions they let a new channel's stream be walked from the floor.
WITH found AS (
    SELECT m.message_id, m.channel_id, m.message_seq
    FROM unnest((SELECT @message_ids::uuid[])) AS ids(id)
    CROSS JOIN LATERAL (SELECT messages.message_id, messages.channel_id, messages.message_seq FROM messages
                        WHERE messages.box_id = @box_id AND messages.message_id = ids.id
                        OFFSET 0) AS m
)
SELECT message_id FROM found WHERE channel_id = @channel_id AND message_seq > @floor;

-- name: RecordReceipts :exec
-- A receipt per returned message the reader has an attention row for: this session was shown
-- that row (the precondition of its ACK). Never an ACK.
-- One lookup per message by the row's key (box_id, message_id, agent_id): the LATERAL with
-- OFFSET 0 cannot become a join over the reader's whole inbox.
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
SELECT @box_id, @agent_id, a.inbox_seq, @session_id
FROM unnest((SELECT @message_ids::uuid[])) AS ids(message_id)
CROSS JOIN LATERAL (SELECT attention.inbox_seq FROM attention
                    WHERE attention.box_id = @box_id AND attention.message_id = ids.message_id AND attention.agent_id = @agent_id
                    OFFSET 0) AS a
ON CONFLICT DO NOTHING;
