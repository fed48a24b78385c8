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
