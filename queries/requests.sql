-- Response requests (SPEC §8): one row per (request message, recipient), created by the
-- send; declarations by compare-and-set. A request is listed only while its message is
-- visible to the caller: a DM participant, or an active room member above its read floor
-- (room_readers, 0003_inbox.sql).

-- name: GetRequest :one
SELECT * FROM requests
WHERE box_id = @box_id AND message_id = @message_id AND recipient_agent_id = @recipient_agent_id;

-- name: RespondRequest :one
-- Compare-and-set of a declaration; no row when the revision is stale.
UPDATE requests
SET status = @status, revision = revision + 1, updated_at = @now, reply_message_id = @reply_message_id
WHERE box_id = @box_id AND message_id = @message_id AND recipient_agent_id = @recipient_agent_id
  AND revision = @expected_revision
RETURNING *;

-- name: IncomingRequests :many
-- The caller's incoming requests, keyset on message_seq (one request per message for a
-- recipient), optionally one status.
SELECT r.* FROM requests r
JOIN messages m ON m.box_id = r.box_id AND m.message_id = r.message_id
LEFT JOIN room_readers rr ON m.dest_kind = 'room' AND rr.box_id = r.box_id AND rr.room_id = m.channel_id
     AND rr.agent_id = r.recipient_agent_id
WHERE r.box_id = @box_id AND r.recipient_agent_id = @agent_id AND r.message_seq > @after_seq
  AND (sqlc.narg(status)::text IS NULL OR r.status = sqlc.narg(status)::text)
  AND (m.dest_kind = 'dm' OR m.message_seq > rr.read_floor)
ORDER BY r.message_seq
LIMIT @max_rows;

-- name: OutgoingRequests :many
-- The caller's outgoing requests, keyset on (message_seq, recipient_agent_id) so each
-- recipient's declaration of one message is its own row, optionally one status.
SELECT r.* FROM requests r
JOIN messages m ON m.box_id = r.box_id AND m.message_id = r.message_id
LEFT JOIN room_readers rr ON m.dest_kind = 'room' AND rr.box_id = r.box_id AND rr.room_id = m.channel_id
     AND rr.agent_id = r.requester_agent_id
WHERE r.box_id = @box_id AND r.requester_agent_id = @agent_id
  AND (r.message_seq, r.recipient_agent_id) > (@after_seq::bigint, @after_recipient::uuid)
  AND (sqlc.narg(status)::text IS NULL OR r.status = sqlc.narg(status)::text)
  AND (m.dest_kind = 'dm' OR m.message_seq > rr.read_floor)
ORDER BY r.message_seq, r.recipient_agent_id
LIMIT @max_rows;

-- name: PendingIncomingRequests :one
-- Pending incoming requests whose message the agent may still see (agent_prime).
SELECT count(*)::bigint FROM requests r
JOIN messages m ON m.box_id = r.box_id AND m.message_id = r.message_id
LEFT JOIN room_readers rr ON m.dest_kind = 'room' AND rr.box_id = r.box_id AND rr.room_id = m.channel_id
     AND rr.agent_id = r.recipient_agent_id
WHERE r.box_id = @box_id AND r.recipient_agent_id = @agent_id AND r.status = 'pending'
  AND (m.dest_kind = 'dm' OR m.message_seq > rr.read_floor);
