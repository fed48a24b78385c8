-- The claim's fallback checks accessibility only for the expired leases it takes (issue 10).
--
-- With accessible_only, inbox_lock_expired_leases (0020) filtered every expired lease of the
-- agent by accessibility before the sort and the LIMIT: a room row's check is two or three
-- index probes (its membership, the message), so a fallback claim cost about four probes per
-- expired lease however few rows it returned. On a box with 6,600 expired leases that was
-- 5,400 buffers and 2.5-3 ms for 20 rows, against 20 buffers on a new box. Now the expired
-- rows are sorted in inbox_seq order first and checked one by one as the LIMIT pulls them,
-- after their row lock (as LockClaimCandidatesOldest checks its candidates): the checks stop
-- at the LIMIT. The sort still reads every expired lease of the agent (the expiry index holds
-- no inbox_seq order); that is the same range the claim's own candidates read, and it is
-- empty while no lease has run out.
--
-- OFFSET 0 keeps the check out of the locking subquery: the planner never pushes a
-- condition into a subquery that has a LIMIT or OFFSET. The outer query has no ORDER BY of
-- its own, which would sort (and so check and lock) every row again: rows leave the subquery
-- in its order and the LIMIT stops pulling once it has max_rows. The subquery locks only the
-- rows pulled from it; an inaccessible row it pulled stays locked, unleased, until the claim
-- commits, as in the claim's candidates.
CREATE OR REPLACE FUNCTION inbox_lock_expired_leases(box uuid, agent uuid, at timestamptz, max_rows integer, newest boolean,
                                                     accessible_only boolean)
RETURNS TABLE (inbox_seq bigint, box_id uuid, agent_id uuid, channel_id uuid, message_id uuid, reasons integer)
LANGUAGE plpgsql VOLATILE ROWS 10
AS $$
DECLARE
    expired text := 'SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons FROM attention a
         WHERE a.box_id = $1 AND a.agent_id = $2 AND a.acked_by_session_id IS NULL
           AND a.lease_session_id IS NOT NULL AND a.lease_expires_at <= $3
         ORDER BY a.inbox_seq + 0' || CASE WHEN newest THEN ' DESC' ELSE '' END;
BEGIN
    IF NOT accessible_only THEN
        RETURN QUERY EXECUTE expired || ' LIMIT $4 FOR UPDATE OF a SKIP LOCKED' USING box, agent, at, max_rows;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons
         FROM (' || expired || ' OFFSET 0 FOR UPDATE OF a SKIP LOCKED) AS a
         WHERE (a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                  WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = ''active''
                    AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                 WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0)
         LIMIT $4'
        USING box, agent, at, max_rows;
END
$$;
