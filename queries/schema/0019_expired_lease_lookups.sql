-- The two lookups of an agent's leases by expiry, planned with their values at every call
-- (issue 10; 0020_accessible_expired_leases.sql says why they must be).
--
-- Condition on lease_expires_at against a bound (@now) that a generic plan does not know: the
-- planner then takes a third of the agent's rows for a match and, with no statistics on
-- box_id and agent_id (0010_inbox_paths.sql), an agent's rows for a row or two, and may walk
-- the agent's whole inbox by attention_pkey with every lease condition a filter instead of
-- reading the expiry range of attention_lease_expiry. Until now the statements holding them
-- (LockClaimCandidatesOldest/Newest, InboxCounts) were planned whole at every call, which cost
-- about 0.7 ms per claim and 0.5 ms per inbox_list on an idle machine. Here only the lookup is:
-- EXECUTE … USING plans its query each time with the values as constants, and the statements
-- around it keep their cached plans.

-- The expired leases of an agent's inbox that no ACK ended ("expired" in
-- LockClaimCandidatesOldest, queries/inbox.sql, which says why the condition is spelled so),
-- up to max_rows of them in inbox_seq order (newest: descending), locked until commit; rows
-- another claim holds are skipped.
CREATE FUNCTION inbox_lock_expired_leases(box uuid, agent uuid, at timestamptz, max_rows integer, newest boolean)
RETURNS TABLE (inbox_seq bigint, box_id uuid, agent_id uuid, channel_id uuid, message_id uuid, reasons integer)
LANGUAGE plpgsql VOLATILE ROWS 10
AS $$
BEGIN
    RETURN QUERY EXECUTE
        'SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons FROM attention a
         WHERE a.box_id = $1 AND a.agent_id = $2 AND a.acked_by_session_id IS NULL
           AND a.lease_session_id IS NOT NULL AND a.lease_expires_at <= $3
         ORDER BY a.inbox_seq + 0' || CASE WHEN newest THEN ' DESC' ELSE '' END || '
         LIMIT $4
         FOR UPDATE OF a SKIP LOCKED'
        USING box, agent, at, max_rows;
END
$$;

-- The agent's live leases, and those of one session: one range of attention_lease_expiry
-- (InboxCounts).
CREATE FUNCTION inbox_live_leases(box uuid, agent uuid, session uuid, at timestamptz,
                                  OUT leased bigint, OUT leased_by_session bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    EXECUTE
        'SELECT count(*), count(*) FILTER (WHERE a.lease_session_id = $3) FROM attention a
         WHERE a.box_id = $1 AND a.agent_id = $2 AND a.lease_session_id IS NOT NULL AND a.lease_expires_at > $4'
        INTO leased, leased_by_session
        USING box, agent, session, at;
END
$$;
