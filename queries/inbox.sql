-- Inbox (SPEC §7, §9): pages of an agent's attention rows, receipts, ACK and work leases.
-- Statements about given rows (@inbox_seqs) also bound inbox_seq by the array's least and
-- greatest value. A box, agent or channel the statistics do not know (the inbox_paths migration)
-- is estimated at a row or two, and PostgreSQL (15) then prefers to walk the owner's index
-- prefix and apply `inbox_seq = ANY(...)` as a filter over using it in the index condition;
-- the range is always an index condition, so even that plan reads only the given rows'
-- span of the inbox, never its whole history.
-- Visibility of a row is the accessible_attention view (0003_inbox.sql). The statements
-- that check it row by row spell it as the row's own condition: a DM row
-- (reasons bit 1, SPEC §7) is always accessible (its message is deleted with it, in the same
-- statement: EnforceRetention, DeleteOversizedAttachmentMessages), so only a room row looks
-- up the agent's active membership, and its message only after a rejoin: every row of a
-- room is delivered while its agent is an active member (InsertAttention), each after its
-- epoch's start, so in the first epoch (epoch 1) every one of them is the epoch's (as
-- InboxCounts counts them). The room's own row (room_readers joins it for the read floor)
-- is not needed here. A room row then costs one probe of room_members rather than three
-- (message, membership, room): in the benchmark's drain of room rows the check was a
-- tenth of PostgreSQL's CPU time (issue 10). A page is two
-- steps: the inbox_seqs of the page (one query per filter shape, each on its own index, so a
-- page costs O(page)), then InboxRows for those seqs with their canonical message data.

-- name: InboxUpper :one
-- The agent's committed inbox upper bound: every row at or below it is committed and visible
-- to the caller's next statement; every later row is above it (0006_inbox_seq.sql). Waits for
-- the sends to this inbox in flight.
SELECT inbox_upper(@box_id, @agent_id)::bigint;

-- name: InboxUnreadSeqs :many
-- The unread rows are the claimable ones and the leased ones, each kind an index range of
-- its own (0012_unread_split.sql): each branch reads at most @max_rows accessible rows in
-- inbox_seq order, and the merged list is cut to @max_rows. Accessibility is
-- accessible_attention's condition on the row itself (see LockClaimCandidatesOldest). The
-- unleased rows start at the agent's claim floor (0017_claim_floor.sql): below it no row is
-- unleased and accessible.
SELECT u.inbox_seq::bigint AS inbox_seq FROM (
    (SELECT a.inbox_seq FROM attention a
     WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NULL
       AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = @box_id AND f.agent_id = @agent_id)
       AND a.inbox_seq > @after AND a.inbox_seq <= @upper
       AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                   WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                     AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                  WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
     ORDER BY a.inbox_seq
     LIMIT @max_rows)
    UNION ALL
    (SELECT a.inbox_seq FROM attention a
     WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NOT NULL
       AND a.inbox_seq > @after AND a.inbox_seq <= @upper
       AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                   WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                     AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                  WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
     ORDER BY a.inbox_seq
     LIMIT @max_rows)
) AS u
ORDER BY u.inbox_seq
LIMIT @max_rows;

-- name: InboxSeqs :many
-- Filter all (acked_only false) or acked.
SELECT inbox_seq FROM accessible_attention
WHERE box_id = @box_id AND agent_id = @agent_id AND (NOT @acked_only::boolean OR acked_at IS NOT NULL)
  AND inbox_seq > @after AND inbox_seq <= @upper
ORDER BY inbox_seq
LIMIT @max_rows;

-- name: InboxChannelUnreadSeqs :many
-- Filter unread of one channel: the channel's unread range.
SELECT a.inbox_seq FROM attention a
WHERE a.box_id = @box_id AND a.channel_id = @channel_id AND a.agent_id = @agent_id AND a.acked_at IS NULL
  AND a.inbox_seq > @after AND a.inbox_seq <= @upper
  AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
              WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                             WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
ORDER BY a.inbox_seq
LIMIT @max_rows;

-- name: InboxChannelSeqs :many
-- Filter all of one channel: its unread rows and its acked rows, each an index range of its
-- own (0014_channel_rows_split.sql), merged as InboxUnreadSeqs merges its two.
SELECT u.inbox_seq::bigint AS inbox_seq FROM (
    (SELECT a.inbox_seq FROM attention a
     WHERE a.box_id = @box_id AND a.channel_id = @channel_id AND a.agent_id = @agent_id AND a.acked_at IS NULL
       AND a.inbox_seq > @after AND a.inbox_seq <= @upper
       AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                   WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                     AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                  WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
     ORDER BY a.inbox_seq
     LIMIT @max_rows)
    UNION ALL
    (SELECT a.inbox_seq FROM attention a
     WHERE a.box_id = @box_id AND a.channel_id = @channel_id AND a.agent_id = @agent_id AND a.acked_at IS NOT NULL
       AND a.inbox_seq > @after AND a.inbox_seq <= @upper
       AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                   WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                     AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                  WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
     ORDER BY a.inbox_seq
     LIMIT @max_rows)
) AS u
ORDER BY u.inbox_seq
LIMIT @max_rows;

-- name: InboxChannelAckedSeqs :many
-- Filter acked of one channel: the channel's acked range (0014_channel_rows_split.sql).
SELECT a.inbox_seq FROM attention a
WHERE a.box_id = @box_id AND a.channel_id = @channel_id AND a.agent_id = @agent_id AND a.acked_at IS NOT NULL
  AND a.inbox_seq > @after AND a.inbox_seq <= @upper
  AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
              WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                             WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
ORDER BY a.inbox_seq
LIMIT @max_rows;

-- name: InboxRows :many
-- The given attention rows of the agent with their messages (as GetMessage), in inbox_seq
-- order. parent_visible: the reply parent still exists above the agent's read floor of the
-- channel (replies stay in their channel; DMs have floor 0); root_visible: likewise the
-- thread root, for a reply whose root is not its parent (a message that starts its thread
-- is its own root, and a reply to the root has parent_visible) — the redaction rules of the
-- canonical Message (reply_to_message_id, thread_root_id).
SELECT sqlc.embed(m), ag.name AS sender_name,
       att.attachment_id, att.name AS attachment_name, att.media_type AS attachment_media_type,
       att.size_bytes AS attachment_size_bytes, att.sha256 AS attachment_sha256,
       a.inbox_seq, a.reasons, a.acked_at, a.acked_by_session_id, a.lease_session_id, a.lease_expires_at,
       (CASE WHEN p.channel_id IS DISTINCT FROM m.channel_id THEN false
             WHEN m.dest_kind <> 'room' THEN true
             ELSE p.message_seq > COALESCE((SELECT rr.read_floor FROM room_readers rr
                                            WHERE rr.box_id = a.box_id AND rr.room_id = a.channel_id AND rr.agent_id = a.agent_id), 0)
        END)::boolean AS parent_visible,
       (CASE WHEN rt.channel_id IS DISTINCT FROM m.channel_id THEN false
             WHEN m.dest_kind <> 'room' THEN true
             ELSE rt.message_seq > COALESCE((SELECT rr.read_floor FROM room_readers rr
                                             WHERE rr.box_id = a.box_id AND rr.room_id = a.channel_id AND rr.agent_id = a.agent_id), 0)
        END)::boolean AS root_visible
FROM attention a
JOIN messages m ON m.box_id = a.box_id AND m.message_id = a.message_id
-- The parent by its key alone (LATERAL, OFFSET 0): with the channel and a read floor in the
-- lookup, a new channel estimated at a row or two could be searched by walking its stream.
LEFT JOIN LATERAL (SELECT parent.channel_id, parent.message_seq FROM messages parent
                   WHERE parent.box_id = m.box_id AND parent.message_id = m.reply_to_message_id
                   OFFSET 0) AS p ON true
-- The thread root the same way, looked up only for a reply whose root is not its parent (a
-- NULL key reads no page, as the attachment's below; a message that is no reply has a NULL
-- parent and is its own root).
LEFT JOIN LATERAL (SELECT root.channel_id, root.message_seq FROM messages root
                   WHERE root.box_id = m.box_id
                     AND root.message_id = CASE WHEN m.thread_root_id <> m.reply_to_message_id THEN m.thread_root_id END
                   OFFSET 0) AS rt ON true
JOIN agents ag ON ag.box_id = m.box_id AND ag.agent_id = m.sender_agent_id
-- The attachment is looked up only for a message that has one (has_attachment, set with it):
-- otherwise the lookup's key is NULL, which an index scan answers without reading a page.
-- The read floor (parent_visible, above) only for a reply whose parent is in the same room:
-- a CASE evaluates its subquery only in that branch. A plain message costs neither probe (the
-- read floor's view is two: the membership and the room). As a join keyed by a CASE, the
-- read floor was still read for every row: the generic plan joined the agent's memberships
-- to the box's rooms once per row and applied the key as a join filter (400 of 1,108 buffers
-- of a drain round's 100 rows, issue 10).
LEFT JOIN attachments att ON att.box_id = m.box_id
     AND att.message_id = CASE WHEN m.has_attachment THEN m.message_id END
WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.inbox_seq = ANY(@inbox_seqs::bigint[])
  AND a.inbox_seq >= (SELECT min(k) FROM unnest(@inbox_seqs::bigint[]) AS k) AND a.inbox_seq <= (SELECT max(k) FROM unnest(@inbox_seqs::bigint[]) AS k)
ORDER BY a.inbox_seq;

-- name: RecordInboxReceipts :exec
-- This session was shown these rows (the precondition of their ACK). Never an ACK; an
-- existing receipt keeps its lease_replaced mark.
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
SELECT @box_id, @agent_id, s, @session_id FROM unnest(@inbox_seqs::bigint[]) AS s
ON CONFLICT DO NOTHING;

-- name: InboxCounts :one
-- unread: accessible unread rows; leased: live leases of the agent (leaving a room and
-- purging a message end leases, so every lease is on an accessible row); leased_by_session:
-- those held by this session (both counted in one range of attention_lease_expiry).
-- unread is accessible_attention's rule applied per channel rather than per row. A channel's
-- unread rows are its delivered counter less its acked counter (0015_inbox_counts.sql): a
-- few rows per channel the agent has rows in, however many rows. A DM channel's rows all
-- count; a room's count only while the agent is an active member, all of them in its first
-- membership epoch (every row was delivered during it); only after a rejoin are the room's
-- unread rows checked one by one against the epoch's start. The live leases are counted by
-- inbox_live_leases, which reads only the lease-expiry range: with every agent estimated at a
-- row or two, a plain count could walk the agent's inbox instead
-- (0021_lease_lookups_by_expiry_only.sql says why and how).
SELECT (SELECT COALESCE(sum(CASE
                 WHEN c.kind = 'dm' THEN u.n
                 WHEN rm.state IS DISTINCT FROM 'active' THEN 0
                 WHEN rm.epoch = 1 THEN u.n
                 ELSE (SELECT count(*) FROM attention a
                       JOIN messages m ON m.box_id = a.box_id AND m.message_id = a.message_id
                       WHERE a.box_id = @box_id AND a.channel_id = u.channel_id AND a.agent_id = @agent_id
                         AND a.acked_at IS NULL AND m.message_seq > rm.epoch_start_seq)
               END), 0)
        -- The agent's two counter ranges are each read once, whole, and summed per channel
        -- (acked rows counted negative, every shard): no join between them. Per channel
        -- lookups read 8,091 buffers for an agent of 2,000 rooms in the plans-test world; a
        -- join of the two ranges, in the generic plan that estimates each at a row or two,
        -- was a nested loop that aggregated the whole acked range again for every delivered
        -- row (1,980,000 buffers, 870 ms; TestInboxCountsReadsEachCounterRangeOnce). Only
        -- channels with unread rows are then looked up, by key (OFFSET 0 keeps it one: as a
        -- join, a generic plan read every channel of the box).
        FROM (SELECT x.channel_id, sum(x.n) AS n
              FROM (SELECT d.channel_id, d.n FROM inbox_delivered d WHERE d.box_id = @box_id AND d.agent_id = @agent_id
                    UNION ALL
                    SELECT k.channel_id, -k.n FROM inbox_acked k WHERE k.box_id = @box_id AND k.agent_id = @agent_id) AS x
              GROUP BY x.channel_id OFFSET 0) AS u
        CROSS JOIN LATERAL (SELECT c.kind FROM channels c WHERE c.box_id = @box_id AND c.channel_id = u.channel_id OFFSET 0) AS c
        LEFT JOIN LATERAL (SELECT rm.state, rm.epoch, rm.epoch_start_seq FROM room_members rm
                           WHERE rm.box_id = @box_id AND rm.room_id = u.channel_id AND rm.agent_id = @agent_id OFFSET 0) AS rm
               ON c.kind = 'room'
        WHERE u.n > 0)::bigint AS unread,
       l.leased::bigint AS leased, l.leased_by_session::bigint AS leased_by_session
FROM inbox_live_leases(@box_id, @agent_id, @session_id::uuid, @now::timestamptz) AS l;

-- name: LockAckRows :many
-- The agent's rows among the given seqs, locked until commit (in inbox_seq order, so
-- concurrent ACKs cannot deadlock), with their first ACK and their lease. Whether each is
-- still accessible and the session's receipts are read by AckRowStates, the next statement
-- of the same round trip (it says why).
SELECT a.inbox_seq, a.acked_at, a.acked_by_session_id, a.lease_session_id, a.lease_expires_at
FROM attention a
WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.inbox_seq = ANY(@inbox_seqs::bigint[])
  AND a.inbox_seq >= (SELECT min(k) FROM unnest(@inbox_seqs::bigint[]) AS k) AND a.inbox_seq <= (SELECT max(k) FROM unnest(@inbox_seqs::bigint[]) AS k)
ORDER BY a.inbox_seq
FOR UPDATE OF a;

-- name: AckRowStates :many
-- For each of the given rows: whether it is still accessible (accessible_attention's
-- condition on the row itself, see LockClaimCandidatesOldest) and the session's receipt with
-- its lease_replaced mark. Sent right after LockAckRows, in the same round trip, as a
-- statement of its own: when LockAckRows waited for a row, the transaction it waited for
-- may have changed what the ACK rules read, and only a statement started after the wait sees
-- it. A room leave ends the agent's leases in the room (it locks those rows) as it ends the
-- membership; a claim taking over an expired lease marks the former holder's receipt
-- replaced (MarkLeasesReplaced); an ACK ending one leaves the holder a receipt
-- (KeepLeaseReceipts). Read in LockAckRows, whose snapshot predates the wait, the leave's
-- row would still be accessible and the receipts would be missing. The rows are read again
-- by key (one index probe each, the rows just locked): that is the price of a fresh look.
SELECT a.inbox_seq,
       ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
               WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                 AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                              WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))::boolean AS accessible,
       (r.session_id IS NOT NULL)::boolean AS has_receipt, COALESCE(r.lease_replaced, false)::boolean AS lease_replaced
FROM attention a
-- OFFSET 0: the receipt is one probe of its key per row, never a walk of the agent's receipts.
LEFT JOIN LATERAL (SELECT r.session_id, r.lease_replaced FROM receipts r
                   WHERE r.box_id = a.box_id AND r.agent_id = a.agent_id AND r.inbox_seq = a.inbox_seq AND r.session_id = @session_id
                   OFFSET 0) r ON true
WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.inbox_seq = ANY(@inbox_seqs::bigint[])
  AND a.inbox_seq >= (SELECT min(k) FROM unnest(@inbox_seqs::bigint[]) AS k) AND a.inbox_seq <= (SELECT max(k) FROM unnest(@inbox_seqs::bigint[]) AS k);

-- name: AckRows :exec
-- ACK means read: sets the first ACK's session and time (never changed after) and ends the
-- row's lease. Nothing else changes (no retention extension, no request status). Each
-- channel's acked counter (0015_inbox_counts.sql: the session's shard of it) grows by its
-- rows acked here. The counter rows are written in channel order (the sorted INSERT), so
-- concurrent ACKs of one agent take them in one order, and in the ACK's COMMIT round trip,
-- after every other lock it waits for (internal/store AckRows), so one is held only while
-- the ACK commits.
WITH acked AS (
    UPDATE attention SET acked_at = @now::timestamptz, acked_by_session_id = @session_id::uuid, lease_session_id = NULL, lease_expires_at = NULL
    WHERE box_id = @box_id AND agent_id = @agent_id AND inbox_seq = ANY(@inbox_seqs::bigint[]) AND acked_at IS NULL
      AND inbox_seq >= (SELECT min(k) FROM unnest(@inbox_seqs::bigint[]) AS k) AND inbox_seq <= (SELECT max(k) FROM unnest(@inbox_seqs::bigint[]) AS k)
    RETURNING channel_id
)
INSERT INTO inbox_acked AS k (box_id, agent_id, channel_id, shard, n)
SELECT @box_id, @agent_id, channel_id, inbox_ack_shard(@session_id::uuid), count(*) FROM acked GROUP BY channel_id ORDER BY channel_id
ON CONFLICT (box_id, agent_id, channel_id, shard) DO UPDATE SET n = k.n + EXCLUDED.n;

-- name: LockClaimCandidatesOldest :many
-- inbox_claim's first step: up to @max_rows unread rows that no live lease holds, oldest
-- first, locked until commit, each with whether it is accessible to the agent. Two index
-- ranges, never the inbox's live leases (the inbox_paths migration): "fresh" walks the unread
-- rows nobody leases in inbox_seq order, "expired" the leases that have run out
-- (inbox_lock_expired_leases, 0021_lease_lookups_by_expiry_only.sql); the union is cut to
-- @max_rows. Rows another claim has locked are skipped (SKIP LOCKED) and a row claimed and committed meanwhile is re-checked on its new
-- version, so two claims never lease the same row. (Each branch locks at most @max_rows; a
-- row the cut drops stays locked, unleased, until this claim commits.)
-- Rows are locked before their accessibility is checked: concurrent claims of one agent all
-- start at the front of its inbox, and a check in the scan's filter ran for every row the
-- other claims hold before SKIP LOCKED passed it (350 checks for 50 rows with 8 sessions,
-- issue 10). Checked after the lock, it runs once per row returned. A row the agent can no
-- longer read (a room it left) is returned with accessible false and is not leased; when one
-- is among a full batch the claim falls back to ClaimAccessibleOldest (internal/store
-- LockClaimable). The check is accessible_attention's condition applied to the row itself
-- (for a room row its message and the agent's membership; see the top of this file), not a
-- second lookup of the row: with a new agent estimated at a row or two, that lookup may pick
-- an index whose unbound channel column makes it walk the inbox. OFFSET 0 keeps it a per-row lookup on the row's keys, so a claim costs
-- O(rows it returns) whatever the inbox size, the number of live leases or the statistics.
-- "fresh" starts at the agent's claim floor (0017_claim_floor.sql): below it every row is
-- leased, acked or inaccessible, and the index entries the leased and acked rows left behind
-- until VACUUM are not walked again by every claim.
-- "expired" says "not acked" as acked_by_session_id IS NULL (set with acked_at by every
-- ACK), not acked_at IS NULL: written with acked_at, the condition also matches
-- attention_leased_unread's predicate, and the generic plan of a busy inbox chose that index
-- (box and agent only, the expiry as a filter): a walk of every live lease and of the entries
-- ACKs left behind (1,212 buffers, 12 ms per claim late in the benchmark's drain, rising as
-- it went). Any plan could also take attention_pkey on (box_id, agent_id) with every
-- condition a filter, a walk of the whole inbox, and one did in the benchmark's live mix; the
-- function reads the lease-expiry range by construction and locks the rows it takes by
-- position (0021_lease_lookups_by_expiry_only.sql says how).
WITH fresh AS (
    SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons FROM attention a
    WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NULL
      AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = @box_id AND f.agent_id = @agent_id)
    ORDER BY a.inbox_seq
    LIMIT @max_rows
    FOR UPDATE OF a SKIP LOCKED
), expired AS (
    SELECT e.inbox_seq, e.box_id, e.agent_id, e.channel_id, e.message_id, e.reasons
    FROM inbox_lock_expired_leases(@box_id, @agent_id, @now::timestamptz, @max_rows::integer, false, false) AS e (inbox_seq, box_id, agent_id, channel_id, message_id, reasons)
)
SELECT a.inbox_seq::bigint AS inbox_seq,
       ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
               WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                 AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                              WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))::boolean AS accessible
FROM (SELECT * FROM fresh UNION ALL SELECT * FROM expired) AS a
ORDER BY a.inbox_seq
LIMIT @max_rows;

-- name: LockClaimCandidatesNewest :many
-- As LockClaimCandidatesOldest, newest first.
WITH fresh AS (
    SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons FROM attention a
    WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NULL
      AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = @box_id AND f.agent_id = @agent_id)
    ORDER BY a.inbox_seq DESC
    LIMIT @max_rows
    FOR UPDATE OF a SKIP LOCKED
), expired AS (
    SELECT e.inbox_seq, e.box_id, e.agent_id, e.channel_id, e.message_id, e.reasons
    FROM inbox_lock_expired_leases(@box_id, @agent_id, @now::timestamptz, @max_rows::integer, true, false) AS e (inbox_seq, box_id, agent_id, channel_id, message_id, reasons)
)
SELECT a.inbox_seq::bigint AS inbox_seq,
       ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
               WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                 AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                              WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))::boolean AS accessible
FROM (SELECT * FROM fresh UNION ALL SELECT * FROM expired) AS a
ORDER BY a.inbox_seq DESC
LIMIT @max_rows;

-- name: ClaimAccessibleOldest :many
-- inbox_claim's fallback, when a full batch of LockClaimCandidatesOldest held a row the agent
-- can no longer read: up to @max_rows accessible unread rows that no live lease holds, oldest
-- first, locked until commit, with the accessibility check in the scan, so rows the agent
-- cannot read never fill the batch (in "expired", inbox_lock_expired_leases filters them,
-- checking only the rows it takes: 0021_lease_lookups_by_expiry_only.sql).
-- The rows LockClaimCandidatesOldest locked are this transaction's and are found again. Same
-- ranges and locking as LockClaimCandidatesOldest.
WITH fresh AS (
    SELECT a.inbox_seq FROM attention a
    WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NULL
      AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = @box_id AND f.agent_id = @agent_id)
      AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                  WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                    AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                 WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
    ORDER BY a.inbox_seq
    LIMIT @max_rows
    FOR UPDATE OF a SKIP LOCKED
), expired AS (
    SELECT e.inbox_seq
    FROM inbox_lock_expired_leases(@box_id, @agent_id, @now::timestamptz, @max_rows::integer, false, true) AS e (inbox_seq, box_id, agent_id, channel_id, message_id, reasons)
)
SELECT c.inbox_seq::bigint AS inbox_seq FROM (SELECT inbox_seq FROM fresh UNION ALL SELECT inbox_seq FROM expired) AS c
ORDER BY c.inbox_seq
LIMIT @max_rows;

-- name: ClaimAccessibleNewest :many
-- As ClaimAccessibleOldest, newest first.
WITH fresh AS (
    SELECT a.inbox_seq FROM attention a
    WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.acked_at IS NULL AND a.lease_session_id IS NULL
      AND a.inbox_seq >= (SELECT COALESCE(max(f.floor_seq), 0) FROM inbox_claim_floors f WHERE f.box_id = @box_id AND f.agent_id = @agent_id)
      AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                  WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                    AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                 WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
    ORDER BY a.inbox_seq DESC
    LIMIT @max_rows
    FOR UPDATE OF a SKIP LOCKED
), expired AS (
    SELECT e.inbox_seq
    FROM inbox_lock_expired_leases(@box_id, @agent_id, @now::timestamptz, @max_rows::integer, true, true) AS e (inbox_seq, box_id, agent_id, channel_id, message_id, reasons)
)
SELECT c.inbox_seq::bigint AS inbox_seq FROM (SELECT inbox_seq FROM fresh UNION ALL SELECT inbox_seq FROM expired) AS c
ORDER BY c.inbox_seq DESC
LIMIT @max_rows;

-- name: AdvanceClaimFloor :exec
-- Raises the agent's claim floor past the rows this claim leased and those leased or acked
-- before it (0017_claim_floor.sql). Sent after LeaseRows, in the COMMIT's round trip.
SELECT inbox_advance_claim_floor(@box_id, @agent_id);

-- name: LeaseRows :exec
-- Leases rows (locked by LockClaimCandidates* or ClaimAccessible*) to this session until
-- @expires_at. The lease is also the session's receipt of each row: a row leased to a
-- session, or acked by it, was returned to it (LockAckRows), so a claim writes no receipt of
-- its own (it wrote one per row: 50 upserts per claim of 50). A session whose expired lease
-- the claim takes over keeps a receipt marked lease_replaced (MarkLeasesReplaced).
UPDATE attention SET lease_session_id = @session_id::uuid, lease_expires_at = @expires_at::timestamptz
WHERE box_id = @box_id AND agent_id = @agent_id AND inbox_seq = ANY(@inbox_seqs::bigint[])
  AND inbox_seq >= (SELECT min(k) FROM unnest(@inbox_seqs::bigint[]) AS k) AND inbox_seq <= (SELECT max(k) FROM unnest(@inbox_seqs::bigint[]) AS k);

-- name: MarkLeasesReplaced :exec
-- A claim took over these rows (@inbox_seqs[i]) from the sessions whose leases on them had
-- expired (@session_ids[i]): each such session keeps a receipt of its row, marked
-- lease_replaced, so its ACK is refused (SPEC §7) although the lease that was its receipt
-- is gone. Sent only when a claim replaces a lease.
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id, lease_replaced)
SELECT @box_id, @agent_id, k.seq, k.session_id, true
FROM (SELECT unnest(@inbox_seqs::bigint[]) AS seq, unnest(@session_ids::uuid[]) AS session_id) AS k
ON CONFLICT (box_id, agent_id, inbox_seq, session_id) DO UPDATE SET lease_replaced = true;

-- name: KeepLeaseReceipts :exec
-- An ACK ended the expired leases of other sessions on these rows (@inbox_seqs[i] held by
-- @session_ids[i]): each keeps a receipt of its row (the lease was one), so it still sees
-- already_acked for the row; an existing receipt keeps its lease_replaced mark. Sent only
-- when an ACK ends another session's lease.
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
SELECT @box_id, @agent_id, k.seq, k.session_id
FROM (SELECT unnest(@inbox_seqs::bigint[]) AS seq, unnest(@session_ids::uuid[]) AS session_id) AS k
ON CONFLICT DO NOTHING;
