-- Inbox reads, ACK and work leases; request and file-report listing (SPEC §7, §8).

-- A receipt whose session's lease on the row expired and was then re-claimed by another
-- session: that session's ACK fails with lease_replaced until it claims the row again.
ALTER TABLE receipts ADD COLUMN lease_replaced boolean NOT NULL DEFAULT false;

-- The active members of rooms and what each may read: read_floor is the message_seq at and
-- below which the member may not read (0 for shared history, the start of the current epoch
-- for joined visibility — the SQL form of service.readFloor); epoch_start_seq is where the
-- current membership epoch began whatever the visibility.
CREATE VIEW room_readers AS
SELECT rm.box_id, rm.room_id, rm.agent_id, rm.epoch_start_seq,
       CASE WHEN r.history_visibility = 'joined' THEN rm.epoch_start_seq ELSE 0 END AS read_floor
FROM room_members rm
JOIN rooms r ON r.box_id = rm.box_id AND r.room_id = rm.room_id
WHERE rm.state = 'active';

-- The attention rows their agent may still list, claim and ACK (SPEC §7, §15): every DM row,
-- and room rows delivered in the agent's current, active membership epoch. Rows of a room the
-- agent left are hidden; a member who rejoins does not get old attention back.
CREATE VIEW accessible_attention AS
SELECT a.box_id, a.agent_id, a.inbox_seq, a.message_id, a.channel_id, a.reasons, a.acked_at,
       a.acked_by_session_id, a.lease_session_id, a.lease_expires_at, m.message_seq
FROM attention a
JOIN messages m ON m.box_id = a.box_id AND m.message_id = a.message_id
LEFT JOIN room_readers rr ON m.dest_kind = 'room' AND rr.box_id = a.box_id AND rr.room_id = a.channel_id
     AND rr.agent_id = a.agent_id
WHERE m.dest_kind = 'dm' OR m.message_seq > rr.epoch_start_seq;

-- Unread pages of one room or DM pair (inbox_list with a destination).
CREATE INDEX attention_unread_by_channel ON attention (box_id, agent_id, channel_id, inbox_seq) WHERE acked_at IS NULL;
-- Live-lease counts (inbox_list leased_count, agent_prime leased_by_session).
CREATE INDEX attention_leased ON attention (box_id, agent_id, lease_session_id) WHERE lease_session_id IS NOT NULL;
-- Pending incoming requests (agent_prime pending_requests).
CREATE INDEX requests_pending ON requests (box_id, recipient_agent_id, message_seq) WHERE status = 'pending';
