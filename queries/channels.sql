-- name: LockChannel :one
-- Serializes sends, joins and leaves of one channel until commit (SPEC §6, §7 ordering).
SELECT last_message_seq FROM channels WHERE box_id = @box_id AND channel_id = @channel_id FOR UPDATE;

-- name: ChannelHead :one
-- The committed upper bound of a channel's message stream.
SELECT last_message_seq FROM channels WHERE box_id = @box_id AND channel_id = @channel_id;
