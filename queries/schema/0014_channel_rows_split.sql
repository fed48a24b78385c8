-- A lighter send and lease (issue 10): one index entry fewer per attention row written and
-- per lease.
--
-- attention_by_channel held every row of a channel's inbox, unread or acked, next to
-- attention_unread_by_channel, which holds the unread ones again: every send's row entered
-- both, and so did every lease's new row version. The row of an inbox is either unread or
-- acked, so the per-channel rows are now two disjoint ranges, the unread one that already
-- existed and attention_acked_by_channel: a send's row and a lease's new version enter only
-- the unread one, an ACK's new version only the acked one (as it entered
-- attention_by_channel before). A channel page over every row (InboxChannelSeqs) reads the
-- two as one, in inbox_seq order (queries/inbox.sql); an acked-only page reads its own range
-- instead of walking the channel's unread rows too.
CREATE INDEX attention_acked_by_channel ON attention (box_id, channel_id, agent_id, inbox_seq)
    WHERE acked_at IS NOT NULL;
DROP INDEX attention_by_channel;
