-- Each box numbers its own messages and inbox rows (SPEC §2: a box is an isolated tenant;
-- §6: message_seq is "unique in the box"). message_seq and inbox_seq came from two sequences
-- every box shared, so any agent could watch every other box's traffic: the gap between two
-- of its own sends, or the upper bound its inbox cursors carry with no row of its own,
-- counted the messages and attention rows of all boxes in between (outside probe). Now each
-- box has two sequences of its own, created with the box, and the ordering rules of 0006 hold
-- per box unchanged: a send draws its message_seq from box_message_seq(box) after the channel
-- lock, and each inbox_seq from box_inbox_seq(box) after the shared lock on the recipient's
-- inbox; inbox_upper reads the box's inbox sequence under the exclusive lock. CACHE 1, as
-- 0006 says why, for both.

-- The box's sequences, by name (regclass: nextval(box_message_seq(b)) is drawn as nextval of
-- a named sequence).
CREATE FUNCTION box_message_seq(box uuid) RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT ('message_seq_' || replace(box::text, '-', ''))::regclass $$;

CREATE FUNCTION box_inbox_seq(box uuid) RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT ('inbox_seq_' || replace(box::text, '-', ''))::regclass $$;

-- The last inbox_seq the box handed out (0 before its first): the upper bound of an inbox
-- whose exclusive lock the caller holds (inbox_upper, inbox_advance_claim_floor).
CREATE FUNCTION box_inbox_seq_last(box uuid) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT COALESCE(pg_sequence_last_value(box_inbox_seq(box)), 0) $$;

-- A new box gets its sequences in the transaction that creates it.
CREATE FUNCTION boxes_create_sequences() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('CREATE SEQUENCE %I AS bigint CACHE 1', 'message_seq_' || replace(NEW.box_id::text, '-', ''));
    EXECUTE format('CREATE SEQUENCE %I AS bigint CACHE 1', 'inbox_seq_' || replace(NEW.box_id::text, '-', ''));
    RETURN NEW;
END
$$;

CREATE TRIGGER boxes_sequences AFTER INSERT ON boxes FOR EACH ROW EXECUTE FUNCTION boxes_create_sequences();

-- The boxes that exist continue above every value handed out so far (all boxes' values came
-- from the shared sequences), so their streams and cursors keep their meaning.
DO $$
DECLARE
    b       uuid;
    message bigint;
    inbox   bigint;
BEGIN
    SELECT CASE WHEN is_called THEN last_value END INTO message FROM message_seq_seq;
    SELECT CASE WHEN is_called THEN last_value END INTO inbox FROM inbox_seq_seq;
    FOR b IN SELECT box_id FROM boxes LOOP
        EXECUTE format('CREATE SEQUENCE %I AS bigint CACHE 1', 'message_seq_' || replace(b::text, '-', ''));
        EXECUTE format('CREATE SEQUENCE %I AS bigint CACHE 1', 'inbox_seq_' || replace(b::text, '-', ''));
        IF message IS NOT NULL THEN
            PERFORM setval(box_message_seq(b), message);
        END IF;
        IF inbox IS NOT NULL THEN
            PERFORM setval(box_inbox_seq(b), inbox);
        END IF;
    END LOOP;
END
$$;

-- The committed upper bound of an agent's inbox stream (0006's rule, the box's sequence).
CREATE OR REPLACE FUNCTION inbox_upper(box uuid, agent uuid) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    key   bigint := inbox_lock_key(box, agent);
    upper bigint;
BEGIN
    PERFORM pg_advisory_lock(key);
    upper := box_inbox_seq_last(box);
    PERFORM pg_advisory_unlock(key);
    RETURN upper;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    -- A session-level lock outlives the statement: never leave it behind. (When the wait
    -- itself was cancelled nothing is held and this unlock only warns.)
    PERFORM pg_advisory_unlock(key);
    RAISE;
END
$$;

-- 0018's claim floor, reading the box's sequence.
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
        upper := box_inbox_seq_last(box);
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

-- Nothing draws from the shared sequences any more.
DROP SEQUENCE message_seq_seq;
DROP SEQUENCE inbox_seq_seq;
