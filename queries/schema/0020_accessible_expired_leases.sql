-- One mechanism for every lookup of an agent's leases by expiry (issue 10): the claim's
-- fallback statements (ClaimAccessibleOldest/Newest, queries/inbox.sql) read their expired
-- leases through inbox_lock_expired_leases as the claim's candidates do, instead of being
-- planned whole at every call. The function takes whether to keep only rows the agent can
-- read; the fallback is the claim that asks it.
--
-- Why such a lookup is planned with its values at every call. Every other statement is
-- prepared once per connection, and after five executions PostgreSQL may keep a generic plan,
-- made with the parameters unknown, until the tables are analyzed again. An agent's expired
-- leases must be reached through attention_lease_expiry. In a generic plan the expiry bound
-- (@now) is unknown, the planner takes a third of the agent's rows for expired, and an
-- agent's rows are estimated at a row or two whatever its inbox holds (0010_inbox_paths.sql
-- keeps no statistics on box_id and agent_id). A bitmap scan of attention_pkey on (box_id,
-- agent_id), with every lease condition a filter, can then cost less on paper than the expiry
-- range: a walk of the agent's whole inbox at every claim. Seen in the benchmark's W4 drain,
-- in 4 of 22 runs at a 250k backlog, once the store's own ANALYZE (internal/store
-- statistics.go) re-planned the claim statement halfway: 255 ms and 15,000 buffers per claim
-- on a 250,000-row inbox, where the custom plan of the same call read 310 buffers in 0.3 ms.
-- InboxCounts' count of live leases (lease_expires_at > @now) took the same walk in the same
-- state. With the bound a value, the expiry range is the only plan that reads nothing when no
-- lease has expired. EXECUTE … USING plans just the lookup with its values, about 0.1-0.2 ms,
-- while the statement around it keeps its cached plan; planning the claim statement whole at
-- every call cost about 0.7 ms per claim on an idle machine, against 0.02 ms for its cached
-- generic plan.

-- The expired leases of an agent's inbox that no ACK ended ("expired" in
-- LockClaimCandidatesOldest, queries/inbox.sql, which says why the condition is spelled so),
-- up to max_rows of them in inbox_seq order (newest: descending), locked until commit; rows
-- another claim holds are skipped. With accessible_only, only rows the agent can read
-- (accessible_attention's condition on the row itself, as queries/inbox.sql spells it), so
-- rows it cannot read never fill the batch.
CREATE FUNCTION inbox_lock_expired_leases(box uuid, agent uuid, at timestamptz, max_rows integer, newest boolean,
                                          accessible_only boolean)
RETURNS TABLE (inbox_seq bigint, box_id uuid, agent_id uuid, channel_id uuid, message_id uuid, reasons integer)
LANGUAGE plpgsql VOLATILE ROWS 10
AS $$
BEGIN
    RETURN QUERY EXECUTE
        'SELECT a.inbox_seq, a.box_id, a.agent_id, a.channel_id, a.message_id, a.reasons FROM attention a
         WHERE a.box_id = $1 AND a.agent_id = $2 AND a.acked_by_session_id IS NULL
           AND a.lease_session_id IS NOT NULL AND a.lease_expires_at <= $3'
        || CASE WHEN accessible_only THEN '
           AND ((a.reasons & 1) <> 0 OR EXISTS (SELECT 1 FROM room_members rm
                    WHERE rm.box_id = a.box_id AND rm.room_id = a.channel_id AND rm.agent_id = a.agent_id AND rm.state = ''active''
                      AND (rm.epoch = 1 OR EXISTS (SELECT 1 FROM messages m
                                                   WHERE m.box_id = a.box_id AND m.message_id = a.message_id AND m.message_seq > rm.epoch_start_seq)) OFFSET 0))'
           ELSE '' END || '
         ORDER BY a.inbox_seq + 0' || CASE WHEN newest THEN ' DESC' ELSE '' END || '
         LIMIT $4
         FOR UPDATE OF a SKIP LOCKED'
        USING box, agent, at, max_rows;
END
$$;

-- The five-argument form (0019) stays for servers of the previous version while an upgrade
-- rolls through; it is the new one without the accessibility filter.
CREATE OR REPLACE FUNCTION inbox_lock_expired_leases(box uuid, agent uuid, at timestamptz, max_rows integer, newest boolean)
RETURNS TABLE (inbox_seq bigint, box_id uuid, agent_id uuid, channel_id uuid, message_id uuid, reasons integer)
LANGUAGE sql VOLATILE ROWS 10
AS $$ SELECT * FROM inbox_lock_expired_leases(box, agent, at, max_rows, newest, false) $$;
