-- Unread counts without counting rows (issue 10): inbox_list and agent_prime report the
-- agent's unread rows, and InboxCounts counted them one by one from the unread indexes on
-- every call (15 ms at 30,000 unread rows, 1.2 ms at 3,000, 0.3 ms at 300): a cost that grew
-- with the inbox. Each (agent, channel) now keeps two counters, and a channel's unread rows
-- are delivered - acked:
--   inbox_delivered.n  attention rows inserted minus unread rows deleted. Written only by
--                      statements that hold the channel's lock (InsertAttention in a send;
--                      EnforceRetention and DeleteOversizedAttachmentMessages, which delete),
--                      so it adds no wait a send did not already have.
--   inbox_acked.n      rows acknowledged (AckRows), summed over the channel's shards. A
--                      deleted row that was acknowledged stays in both counters, so the
--                      difference is unchanged.
-- They are two tables, not two columns, so a send and an ACK never wait for each other's
-- counter row. An ACK holds its counter rows from its last statement until its COMMIT is
-- flushed, so ACKs of one agent's rows in one channel would queue behind each other's
-- commits (the benchmark's drain, eight sessions working one room: AckRows 1.6 -> 5.0 ms).
-- The acked counter is therefore split into 16 shards, each session writing the one its
-- session_id hashes to (inbox_ack_shard): concurrent sessions mostly write different rows.
-- An ACK writes its counters in channel order, after everything else it locks, so the waits
-- that remain are short and cannot form a cycle. Neither table is indexed beyond its key,
-- and neither has a foreign key (like attention, 0011): the counters are written in the
-- statements that write the rows they count.
CREATE TABLE inbox_delivered (
    box_id     uuid NOT NULL,
    agent_id   uuid NOT NULL,
    channel_id uuid NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (box_id, agent_id, channel_id)
) WITH (fillfactor = 70); -- room for HOT updates: a counter row is rewritten at every send

CREATE TABLE inbox_acked (
    box_id     uuid NOT NULL,
    agent_id   uuid NOT NULL,
    channel_id uuid NOT NULL,
    shard      smallint NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (box_id, agent_id, channel_id, shard)
) WITH (fillfactor = 70);

-- The acked counter shard a session writes.
CREATE FUNCTION inbox_ack_shard(session uuid) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (hashtextextended(session::text, 0) & 15)::smallint $$;

-- InboxCounts reads one agent's counter rows and looks each channel with unread rows up by
-- key: the right plan for an agent with two channels or two thousand. Planned generically (a
-- prepared statement), the estimate of an agent's rows is the table's rows over its distinct
-- agents, and one box whose agents are each in thousands of rooms made that estimate large
-- enough that PostgreSQL planned the statement again at every call (TestPlansForNewBox).
-- Declaring agent_id as distinct as the rows themselves keeps the estimate at a row or two,
-- where the per-channel lookups stay the plan. (Taken into account at the next ANALYZE.)
ALTER TABLE inbox_delivered ALTER COLUMN agent_id SET (n_distinct = -1);
ALTER TABLE inbox_acked ALTER COLUMN agent_id SET (n_distinct = -1);

-- Sets one box's counters from its attention rows: the backfill below, and for the
-- benchmark's and the tests' SQL seeders, which write attention rows directly. Run it only
-- where nothing writes to the box at the same time.
CREATE FUNCTION inbox_recount(box uuid) RETURNS void LANGUAGE sql AS $$
    DELETE FROM inbox_delivered WHERE box_id = box;
    DELETE FROM inbox_acked WHERE box_id = box;
    INSERT INTO inbox_delivered (box_id, agent_id, channel_id, n)
    SELECT box_id, agent_id, channel_id, count(*) FROM attention WHERE box_id = box GROUP BY box_id, agent_id, channel_id;
    INSERT INTO inbox_acked (box_id, agent_id, channel_id, shard, n)
    SELECT box_id, agent_id, channel_id, 0, count(*) FROM attention WHERE box_id = box AND acked_at IS NOT NULL
    GROUP BY box_id, agent_id, channel_id;
$$;

SELECT inbox_recount(box_id) FROM boxes;
