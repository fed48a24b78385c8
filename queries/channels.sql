-- name: LockChannel :one
-- Serializes sends, joins and leaves of one channel until commit (SPEC §6, §7 ordering).
SELECT last_message_seq FROM channels WHERE box_id = @box_id AND channel_id = @channel_id FOR UPDATE;

-- name: ChannelHead :one
-- The committed upper bound of a channel's message stream.
SELECT last_message_seq FROM channels WHERE box_id = @box_id AND channel_id = @channel_id;

-- name: LockDMChannels :many
-- Locks the DM channels of the given pairs (dm_agent_lo < dm_agent_hi) until commit, in
-- channel_id order: a batch locks several channels, always in this order, and before any
-- inbox lock, so concurrent sends cannot deadlock. The channels are found pair by pair first
-- (a pair never changes channel, so this needs no lock; a pair has one channel, and LIMIT 1
-- keeps the subquery a per-pair index probe): matched as a set, the generic plan scans every
-- DM channel of the box and hash-joins. The arrays are read as in queries/messages.sql
-- ("array parameters").
SELECT ch.channel_id, ch.dm_agent_lo, ch.dm_agent_hi, ch.last_message_seq FROM channels ch
WHERE ch.box_id = @box_id AND ch.channel_id = ANY(ARRAY(
    SELECT c.channel_id FROM (SELECT unnest((SELECT @los::uuid[])) AS lo, unnest((SELECT @his::uuid[])) AS hi) AS p
    CROSS JOIN LATERAL (SELECT d.channel_id FROM channels d
                        WHERE d.box_id = @box_id AND d.kind = 'dm' AND d.dm_agent_lo = p.lo AND d.dm_agent_hi = p.hi
                        LIMIT 1) AS c))
ORDER BY ch.channel_id
FOR UPDATE;

-- name: EnsureDMChannels :exec
-- Creates the DM channels of the given pairs that do not exist yet (first message of a pair).
-- Pairs are inserted in pair order so concurrent creators wait on each other in one order.
INSERT INTO channels (box_id, channel_id, kind, dm_agent_lo, dm_agent_hi, created_at)
SELECT @box_id, gen_random_uuid(), 'dm', p.lo, p.hi, @now
FROM (SELECT unnest(@los::uuid[]) AS lo, unnest(@his::uuid[]) AS hi) AS p
ORDER BY p.lo, p.hi
ON CONFLICT (box_id, dm_agent_lo, dm_agent_hi) DO NOTHING;

-- name: DMChannelHead :one
-- A DM pair's channel and its committed upper bound (no row before the pair's first message).
SELECT channel_id, last_message_seq FROM channels
WHERE box_id = @box_id AND kind = 'dm' AND dm_agent_lo = @lo AND dm_agent_hi = @hi;
