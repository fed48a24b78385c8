-- The lookups of an agent's leases by expiry read the lease-expiry range and nothing else,
-- whatever the planner estimates, and the claim's fallback checks accessibility only for the
-- rows it takes (issue 10).
--
-- 1. The expiry range, by construction. 0019/0020 planned each lookup with its values at
--    every call (EXECUTE … USING) so that the bound on lease_expires_at was a constant. That
--    was not enough. Every agent is estimated at a row or two (no statistics on box_id and
--    agent_id: 0010_inbox_paths.sql), so attention_pkey on (box_id, agent_id), every lease
--    condition a filter, and attention_lease_expiry cost the same to the planner, and the tie
--    goes by index pages per live entry. A busy inbox churns attention_lease_expiry (a lease
--    adds an entry, its ACK leaves the entry dead until VACUUM): in the benchmark's W4 live
--    mix the index held 14 pages for 5 live leases, the planner took attention_pkey, and
--    every claim walked the worker's whole inbox: 5,160 rows, 5,217 buffers, 11 ms (auto_explain),
--    growing with the inbox (internal/store TestLeaseLookupsReadOnlyTheExpiryRange rebuilds
--    that state). Now each lookup reads its rows in a subquery ordered by lease_expires_at,
--    planned with sorting disabled (the functions' SET clause, restored when they return):
--    the one plan that needs no sort is attention_lease_expiry's range in its own order, so it
--    is the plan, generic or custom. The statements are static and keep their cached plans:
--    the 0.1-0.2 ms of planning per call goes too.
--
-- 2. Locking in inbox_seq order without walking by it. Claims take expired leases oldest
--    first (newest with order newest), which the expiry index cannot give. The lookup reads the
--    expired rows' positions (ctid) in inbox_seq order, then locks them one at a time by
--    position (a TID scan, cheaper than any index path), rechecking every condition on the row
--    it finds and skipping rows another claim holds, until it has max_rows. A row updated
--    since it was read is not found at its old position and is left to the next claim.
--    The read is O(expired leases) and the locking O(rows taken).
--
-- 3. With accessible_only (the claim's fallback), 0020 checked accessibility for every expired
--    lease before the LIMIT: about four index probes per expired lease for a claim of 20
--    (33,164 buffers, 31 ms with 6,600 expired leases on room rows, against 264 buffers now).
--    Here a row is checked once it is locked, and the checks stop with the batch.
CREATE OR REPLACE FUNCTION inbox_lock_expired_leases(box uuid, agent uuid, at timestamptz, max_rows integer, newest boolean,
                                                     accessible_only boolean)
RETURNS TABLE (inbox_seq bigint, box_id uuid, agent_id uuid, channel_id uuid, message_id uuid, reasons integer)
LANGUAGE plpgsql VOLATILE ROWS 10
SET enable_sort = off
SET enable_incremental_sort = off
AS $$
DECLARE
    expired tid[];
    i integer;
    t tid;
    r record;
    taken integer := 0;
BEGIN
    SELECT array_agg(e.ctid ORDER BY e.inbox_seq) INTO expired
    FROM (SELECT a.ctid, a.inbox_seq FROM attention a
          WHERE a.box_id = box AND a.agent_id = agent AND a.acked_by_session_id IS NULL
            AND a.lease_session_id IS NOT NULL AND a.lease_expires_at <= at
          ORDER BY a.lease_expires_at OFFSET 0) AS e;
    IF expired IS NULL OR max_rows < 1 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. cardinality(expired) LOOP
        t := expired[CASE WHEN newest THEN cardinality(expired) + 1 - i ELSE i END];
        SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons INTO r
        FROM attention a
        WHERE a.ctid = t
          AND a.box_id = box AND a.agent_id = agent AND a.acked_by_session_id IS NULL
          AND a.lease_session_id IS NOT NULL AND a.lease_expires_at <= at
        FOR UPDATE OF a SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        -- accessible_attention's condition on the row itself (queries/inbox.sql).
        CONTINUE WHEN accessible_only AND (r.reasons & 1) = 0 AND NOT EXISTS (
            SELECT 1 FROM room_members rm
            WHERE rm.box_id = r.box_id AND rm.room_id = r.channel_id AND rm.agent_id = r.agent_id AND rm.state = 'active'
              AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                           WHERE m.box_id = r.box_id AND m.message_id = r.message_id AND m.message_seq > rm.epoch_start_seq)));
        inbox_seq := r.inbox_seq;
        box_id := r.box_id;
        agent_id := r.agent_id;
        channel_id := r.channel_id;
        message_id := r.message_id;
        reasons := r.reasons;
        RETURN NEXT;
        taken := taken + 1;
        EXIT WHEN taken >= max_rows;
    END LOOP;
END
$$;

-- The live leases of an agent, and those of one session (InboxCounts), counted over the
-- lease-expiry range as above.
CREATE OR REPLACE FUNCTION inbox_live_leases(box uuid, agent uuid, session uuid, at timestamptz,
                                             OUT leased bigint, OUT leased_by_session bigint)
LANGUAGE plpgsql STABLE
SET enable_sort = off
SET enable_incremental_sort = off
AS $$
BEGIN
    SELECT count(*), count(*) FILTER (WHERE l.lease_session_id = inbox_live_leases.session) INTO leased, leased_by_session
    FROM (SELECT a.lease_session_id FROM attention a
          WHERE a.box_id = box AND a.agent_id = agent AND a.lease_session_id IS NOT NULL AND a.lease_expires_at > at
          ORDER BY a.lease_expires_at OFFSET 0) AS l;
END
$$;
