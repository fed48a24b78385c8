-- A lighter send and lease (issue 10): one index entry fewer per attention row written.
--
-- The unread rows of an inbox are exactly the claimable ones (nobody leases them:
-- attention_claimable) and the leased ones, so attention_unread, which held both, is
-- replaced by an index of the leased unread rows: a send's rows enter one of the two
-- (attention_claimable) instead of both, and a lease moves a row from one to the other.
-- The unread stream (InboxUnreadSeqs) and the unread counts read the two as one, in
-- inbox_seq order (queries/inbox.sql).
CREATE INDEX attention_leased_unread ON attention (box_id, agent_id, inbox_seq)
    WHERE acked_at IS NULL AND lease_session_id IS NOT NULL;
DROP INDEX attention_unread;
-- The per-session live-lease count is read from the same lease-expiry range as the agent's
-- (InboxCounts), so its own index goes too: one entry fewer per lease.
DROP INDEX attention_leased;
