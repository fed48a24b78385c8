-- Where a claim's scan of unleased rows starts (issue 10). inbox_claim walks
-- attention_claimable (unread, unleased) from the front of the agent's range. Every row a
-- claim leases leaves its old index entry behind until VACUUM removes it, and those entries
-- are exactly at the front: in a drain of a 250,000-row backlog every claim walked the
-- entries of all the rows drained since the last vacuum (LockClaimCandidatesOldest 10.8-11.6
-- ms on average, 3.2-3.5 ms from the floor; an empty claim after the drain walked 1,788 index
-- pages, 42 ms), a cost that grew with the rows worked. Autovacuum does not keep up with a
-- drain (it wakes once a minute and vacuums a large table for longer than that), and a
-- server whose autovacuum is off never does.
--
-- inbox_claim_floors keeps, per agent, a floor: a seq below which no row of the agent's inbox
-- is claimable as unleased ("fresh": unread, no lease, accessible). The claim scans fresh
-- rows from the floor on (LockClaimCandidatesOldest, ClaimAccessibleOldest), and each claim
-- moves the floor up to the first fresh row it can see (inbox_advance_claim_floor). Expired
-- leases are found by their own range (attention_lease_expiry), not through the floor.
--
-- Why rows below the floor never become claimable:
-- - A row leaves "fresh" by a lease, an ACK or its agent leaving the room, and comes back
--   only by EndRoomLeases (a room leave), which leaves it inaccessible for good: a rejoin
--   starts a new epoch above every old row (room_readers). A row whose lease expires is
--   found through the expiry range.
-- - The floor is raised only past rows that are non-fresh in committed state or by the
--   raising claim itself (then they commit with it, or roll back with the floor). A row
--   another claim has locked but not committed is still fresh to the raising statement, so
--   the floor stops at it: if that claim rolls back, or drops the row from its batch, the row
--   is above the floor.
-- - A send draws its inbox_seq from a global sequence while it holds the inbox's shared lock
--   (0006_inbox_seq.sql), and several sends to one inbox can be in flight: a visible row
--   says nothing of the smaller seq of a send not yet committed. So the floor is raised
--   only when the raising claim takes the inbox lock exclusively without waiting: then no
--   send is in flight, every row at or below the sequence's current value is committed and
--   visible to the next statement, and every later send draws more. The floor never passes
--   that value + 1. A claim that cannot take the lock (a send is in flight) leaves the floor
--   where it is; a later one raises it.
-- - A floor that is only too low costs a longer walk, never a row: a missing floor row is 0.
--
-- One small row per agent that has claimed, updated in place (HOT: no index on floor_seq).
-- A claim that finds the row locked by another claim's raise skips its own raise instead of
-- waiting for that claim's commit. Like the inbox counters (0015), no foreign key: the
-- rows are written by the claim's own statements, and agents are never deleted.
CREATE TABLE inbox_claim_floors (
    box_id    uuid NOT NULL,
    agent_id  uuid NOT NULL,
    floor_seq bigint NOT NULL,
    PRIMARY KEY (box_id, agent_id)
) WITH (fillfactor = 70);

-- Raises the agent's claim floor as far as the rules above allow. Called by inbox_claim in
-- its COMMIT round trip, after its leases (internal/store LeaseRows). Each statement here
-- takes its own snapshot (READ COMMITTED; a function is not a single snapshot), so the walk
-- that finds the first fresh row sees every send the exclusive lock waited out. The walk
-- starts at the old floor: it covers the rows leased since the last raise, not the history.
CREATE FUNCTION inbox_advance_claim_floor(box uuid, agent uuid) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    key   bigint := inbox_lock_key(box, agent);
    upper bigint;
    cur   bigint;
    next  bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN; -- the walk below must see what committed after the transaction began
    END IF;
    IF NOT pg_try_advisory_lock(key) THEN
        RETURN; -- a send to this inbox is in flight
    END IF;
    BEGIN
        SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO upper FROM inbox_seq_seq;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(key); -- a session-level lock outlives the statement
        RAISE;
    END;
    PERFORM pg_advisory_unlock(key);

    SELECT f.floor_seq INTO cur FROM inbox_claim_floors f
    WHERE f.box_id = box AND f.agent_id = agent
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM inbox_claim_floors f WHERE f.box_id = box AND f.agent_id = agent) THEN
            RETURN; -- another claim is raising it
        END IF;
        cur := 0;
    END IF;

    -- The first fresh row at or above the floor (accessible: see LockClaimCandidatesOldest),
    -- among the settled ones.
    SELECT a.inbox_seq INTO next FROM attention a
    WHERE a.box_id = box AND a.agent_id = agent AND a.acked_at IS NULL AND a.lease_session_id IS NULL
      AND a.inbox_seq >= cur AND a.inbox_seq <= upper
      AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM messages m
               JOIN room_readers rr ON rr.box_id = a.box_id AND rr.room_id = a.channel_id AND rr.agent_id = a.agent_id
               WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rr.epoch_start_seq OFFSET 0))
    ORDER BY a.inbox_seq
    LIMIT 1;
    next := COALESCE(next, upper + 1);
    IF next <= cur THEN
        RETURN;
    END IF;
    UPDATE inbox_claim_floors SET floor_seq = next WHERE box_id = box AND agent_id = agent;
    IF NOT FOUND THEN
        INSERT INTO inbox_claim_floors (box_id, agent_id, floor_seq) VALUES (box, agent, next)
        ON CONFLICT (box_id, agent_id) DO UPDATE SET floor_seq = GREATEST(inbox_claim_floors.floor_seq, EXCLUDED.floor_seq);
    END IF;
END
$$;
