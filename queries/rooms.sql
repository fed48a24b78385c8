-- name: GetRoomForAgent :one
-- The room and the caller's membership row (state is NULL when the caller was never invited).
SELECT rooms.room_id, rooms.name, rooms.owner_agent_id, rooms.status, rooms.history_visibility,
       rooms.default_follow, rooms.brief_revision, rooms.created_at,
       room_members.state, room_members.epoch, room_members.epoch_start_seq, room_members.follow,
       room_members.follow_revision, room_members.inviter_agent_id, room_members.invited_at, room_members.joined_at
FROM rooms
LEFT JOIN room_members ON room_members.box_id = rooms.box_id AND room_members.room_id = rooms.room_id
     AND room_members.agent_id = @agent_id
WHERE rooms.box_id = @box_id AND rooms.room_id = @room_id;

-- name: InsertRoomChannel :exec
-- A room's message stream: channel_id = room_id.
INSERT INTO channels (box_id, channel_id, kind, created_at) VALUES (@box_id, @room_id, 'room', @now);

-- name: InsertRoom :exec
INSERT INTO rooms (box_id, room_id, name, owner_agent_id, history_visibility, default_follow, created_at)
VALUES (@box_id, @room_id, @name, @owner_agent_id, @history_visibility, @default_follow, @now);

-- name: InsertRoomOwner :exec
-- The creator: active owner in epoch 1, which starts before any message (epoch_start_seq 0).
INSERT INTO room_members (box_id, room_id, agent_id, state, epoch, epoch_start_seq, follow, joined_at)
VALUES (@box_id, @room_id, @agent_id, 'active', 1, 0, @follow, @now);

-- name: InviteRoomMembers :many
-- Pending invitations for agents never invited or who left; active and pending members are
-- left alone (the service has rejected them already; this keeps a race from reviving them).
-- A new row's follow_revision is 0, never shown (an invitee has no follow preference): the
-- join makes it "1", the first revision a member sees (SPEC §15); a re-invitation keeps the
-- revision the row has, so it never repeats across epochs.
INSERT INTO room_members (box_id, room_id, agent_id, state, inviter_agent_id, invited_at, follow_revision)
SELECT @box_id, @room_id, invitee, 'invited', @inviter_agent_id, @now, 0
FROM unnest(@agent_ids::uuid[]) AS invitee
ON CONFLICT (box_id, room_id, agent_id) DO UPDATE
SET state = 'invited', inviter_agent_id = EXCLUDED.inviter_agent_id, invited_at = EXCLUDED.invited_at
WHERE room_members.state = 'left'
RETURNING agent_id;

-- name: EnabledAgentIDs :many
-- Which of the given IDs are enabled agents of the box (one round trip for any number of targets).
SELECT agent_id FROM agents WHERE box_id = @box_id AND agent_id = ANY(@agent_ids::uuid[]) AND enabled;

-- name: AgentEnabled :one
-- Whether one ID is an enabled agent of the box (EnabledAgentIDs for a single target, with a
-- plan PostgreSQL can cache: an array's length makes it re-plan at every call).
SELECT EXISTS (SELECT 1 FROM agents WHERE box_id = @box_id AND agent_id = @agent_id AND enabled);

-- name: RoomMemberStates :many
-- The current membership state of each given agent that has a membership row.
SELECT agent_id, state FROM room_members
WHERE box_id = @box_id AND room_id = @room_id AND agent_id = ANY(@agent_ids::uuid[]);

-- name: JoinRoom :one
-- Starts a new membership epoch at the channel's committed head; the follow preference
-- restarts at the room default and its revision keeps increasing across epochs.
UPDATE room_members
SET state = 'active', epoch = epoch + 1, epoch_start_seq = @epoch_start_seq, follow = @follow,
    follow_revision = follow_revision + 1, joined_at = @now
WHERE box_id = @box_id AND room_id = @room_id AND agent_id = @agent_id AND state = 'invited'
RETURNING epoch;

-- name: LeaveRoom :one
UPDATE room_members SET state = 'left', left_at = @now
WHERE box_id = @box_id AND room_id = @room_id AND agent_id = @agent_id AND state = 'active'
RETURNING epoch;

-- name: LockRoomUnread :exec
-- Leaving a room first locks the agent's unread rows of the room, so it waits for any claim
-- that holds one: such a claim judged the row accessible on a snapshot from before the leave
-- and leases it in its own transaction, where EndRoomLeases's statement would not see the
-- lease (the row looks unleased, so it matches without waiting) and the lease outlived the
-- leave. Once the claim commits, EndRoomLeases (a later statement) sees and ends its leases;
-- a claim that comes later skips the rows locked here, then finds the membership left.
SELECT 1 FROM attention
WHERE box_id = @box_id AND agent_id = @agent_id AND channel_id = @room_id AND acked_at IS NULL
FOR UPDATE;

-- name: EndRoomLeases :exec
-- Leaving a room ends the agent's outstanding leases on that room's attention rows at once.
-- Each session whose lease ends keeps a receipt of its row (the lease was one, as when an
-- ACK ends an expired lease: KeepLeaseReceipts), so its ACK of the row is refused as a row
-- it can no longer read (not_accessible), not as one it was never shown. The rows are locked
-- (LockRoomUnread): the leases read here are the ones ended.
WITH held AS MATERIALIZED (
    SELECT a.inbox_seq, a.lease_session_id FROM attention a
    WHERE a.box_id = @box_id AND a.agent_id = @agent_id AND a.channel_id = @room_id AND a.lease_session_id IS NOT NULL
), ended AS (
    UPDATE attention SET lease_session_id = NULL, lease_expires_at = NULL
    FROM held
    WHERE attention.box_id = @box_id AND attention.agent_id = @agent_id AND attention.inbox_seq = held.inbox_seq
)
INSERT INTO receipts (box_id, agent_id, inbox_seq, session_id)
SELECT @box_id, @agent_id, held.inbox_seq, held.lease_session_id FROM held
ON CONFLICT DO NOTHING;

-- name: SetRoomFollow :one
-- Compare-and-set of an active member's follow preference.
UPDATE room_members SET follow = @follow, follow_revision = follow_revision + 1
WHERE box_id = @box_id AND room_id = @room_id AND agent_id = @agent_id AND state = 'active'
  AND follow_revision = @expected_revision
RETURNING follow_revision;

-- name: GetRoomBrief :one
SELECT brief_md, brief_revision, brief_updated_at, status FROM rooms WHERE box_id = @box_id AND room_id = @room_id;

-- name: AppendRoomBrief :one
-- Compare-and-set append; also re-checks that the room is active and the total stays within @max_bytes.
UPDATE rooms
SET brief_md = brief_md || @append_md::text, brief_revision = brief_revision + 1, brief_updated_at = @now
WHERE box_id = @box_id AND room_id = @room_id AND brief_revision = @expected_revision AND status = 'active'
  AND octet_length(brief_md) + octet_length(@append_md::text) <= @max_bytes::bigint
RETURNING brief_md, brief_revision, brief_updated_at;

-- name: RoomRoster :many
-- Active members first, then pending invitees, each by (name, agent_id); the caller bounds it.
SELECT room_members.agent_id, agents.name, room_members.state
FROM room_members JOIN agents ON agents.box_id = room_members.box_id AND agents.agent_id = room_members.agent_id
WHERE room_members.box_id = @box_id AND room_members.room_id = @room_id AND room_members.state IN ('active', 'invited')
ORDER BY room_members.state = 'active' DESC, agents.name, room_members.agent_id
LIMIT @max_rows;

-- name: ListAgentRooms :many
-- An agent's active memberships and pending invitations, keyset by room_id.
SELECT rooms.room_id, rooms.name, rooms.status, rooms.brief_revision,
       room_members.state, room_members.follow, room_members.follow_revision,
       room_members.inviter_agent_id, room_members.invited_at
FROM room_members JOIN rooms ON rooms.box_id = room_members.box_id AND rooms.room_id = room_members.room_id
WHERE room_members.box_id = @box_id AND room_members.agent_id = @agent_id
  AND room_members.state IN ('active', 'invited') AND room_members.room_id > @after_room_id::uuid
ORDER BY room_members.room_id
LIMIT @max_rows;

-- name: ListBoxRooms :many
-- Every room of a box with its active member count (admin).
SELECT rooms.room_id, rooms.name, rooms.owner_agent_id, rooms.status, rooms.history_visibility, rooms.created_at,
       (SELECT count(*) FROM room_members
        WHERE room_members.box_id = rooms.box_id AND room_members.room_id = rooms.room_id AND room_members.state = 'active') AS active_members
FROM rooms
WHERE rooms.box_id = @box_id
ORDER BY rooms.name, rooms.room_id;

-- name: GetBoxRoom :one
SELECT rooms.room_id, rooms.name, rooms.owner_agent_id, rooms.status, rooms.history_visibility, rooms.created_at,
       (SELECT count(*) FROM room_members
        WHERE room_members.box_id = rooms.box_id AND room_members.room_id = rooms.room_id AND room_members.state = 'active') AS active_members
FROM rooms
WHERE rooms.box_id = @box_id AND rooms.room_id = @room_id;

-- name: ArchiveRoom :exec
UPDATE rooms SET status = 'archived' WHERE box_id = @box_id AND room_id = @room_id;

-- name: SetRoomOwner :exec
UPDATE rooms SET owner_agent_id = @owner_agent_id WHERE box_id = @box_id AND room_id = @room_id;
