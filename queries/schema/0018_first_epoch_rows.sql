-- A room row's accessibility check reads the agent's membership alone while it is the
-- membership's first epoch (queries/inbox.sql, top, says why): one index probe per row
-- instead of three. inbox_advance_claim_floor (0017_claim_floor.sql) spells the check as the
-- inbox statements do, so it is replaced with the same function in the new form.
CREATE OR REPLACE FUNCTION inbox_advance_claim_floor(box uuid, agent uuid) RETURNS void
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
      AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
               WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = 'active'
                 AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                              WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))
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
