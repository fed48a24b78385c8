-- Claim, ACK and inbox reads that cost O(rows touched), and plans that do not depend on
-- which box (or agent, or channel) a statement is about (SPEC §7; issue 10).

-- inbox_claim reaches claimable rows without walking the inbox's live leases: unread rows
-- nobody leases, in inbox_seq order (ClaimCandidates* "fresh" branch), and leased rows by
-- expiry (the "expired" branch reads only the leases that have run out). The lease-expiry
-- index also counts live leases as one range (InboxCounts).
CREATE INDEX attention_claimable ON attention (box_id, agent_id, inbox_seq)
    WHERE acked_at IS NULL AND lease_session_id IS NULL;
CREATE INDEX attention_lease_expiry ON attention (box_id, agent_id, lease_expires_at)
    WHERE lease_session_id IS NOT NULL;
-- The per-session live-lease count (leased_by_session) is a range on the expiry as well.
DROP INDEX attention_leased;
CREATE INDEX attention_leased ON attention (box_id, agent_id, lease_session_id, lease_expires_at)
    WHERE lease_session_id IS NOT NULL;

-- Plans that survive new boxes. Every statement filters by box first, and most by an agent,
-- channel or sender of that box. Column statistics on those identifiers describe the boxes
-- that existed at the last ANALYZE: an old, large box sits in the most-common-values list,
-- and a box (agent, channel) created since is estimated at about one row, so the planner
-- picks plans for it that walk a whole box's rows through a nested loop — plans that stay
-- cached and grow with the new box until the next ANALYZE, which for a small box in a large
-- table may be days away. Without statistics on these columns (STATISTICS 0: ANALYZE stores
-- none) every box, agent and channel gets the same default estimate, so an old box and one
-- created a second ago get the same plan shapes; the queries are written so that those
-- shapes reach rows by index on their full keys (queries/*.sql; guarded by
-- internal/store TestPlansForNewBox). The other columns keep their statistics.
ALTER TABLE messages ALTER COLUMN box_id SET STATISTICS 0,
                     ALTER COLUMN channel_id SET STATISTICS 0,
                     ALTER COLUMN sender_agent_id SET STATISTICS 0,
                     ALTER COLUMN thread_root_id SET STATISTICS 0;
ALTER TABLE attention ALTER COLUMN box_id SET STATISTICS 0,
                      ALTER COLUMN agent_id SET STATISTICS 0,
                      ALTER COLUMN channel_id SET STATISTICS 0,
                      ALTER COLUMN lease_session_id SET STATISTICS 0;
ALTER TABLE receipts ALTER COLUMN box_id SET STATISTICS 0,
                     ALTER COLUMN agent_id SET STATISTICS 0,
                     ALTER COLUMN session_id SET STATISTICS 0;
ALTER TABLE channel_sender_latest ALTER COLUMN box_id SET STATISTICS 0,
                                  ALTER COLUMN channel_id SET STATISTICS 0,
                                  ALTER COLUMN sender_agent_id SET STATISTICS 0;
ALTER TABLE channels ALTER COLUMN box_id SET STATISTICS 0;
ALTER TABLE room_members ALTER COLUMN box_id SET STATISTICS 0,
                         ALTER COLUMN room_id SET STATISTICS 0,
                         ALTER COLUMN agent_id SET STATISTICS 0;
ALTER TABLE rooms ALTER COLUMN box_id SET STATISTICS 0;
ALTER TABLE requests ALTER COLUMN box_id SET STATISTICS 0,
                     ALTER COLUMN recipient_agent_id SET STATISTICS 0,
                     ALTER COLUMN requester_agent_id SET STATISTICS 0;
ALTER TABLE file_reports ALTER COLUMN box_id SET STATISTICS 0;
ALTER TABLE attachments ALTER COLUMN box_id SET STATISTICS 0;
ALTER TABLE agents ALTER COLUMN box_id SET STATISTICS 0;
ALTER TABLE sessions ALTER COLUMN box_id SET STATISTICS 0,
                     ALTER COLUMN agent_id SET STATISTICS 0;
ALTER TABLE idempotency_records ALTER COLUMN box_id SET STATISTICS 0,
                                ALTER COLUMN agent_id SET STATISTICS 0;
-- Statistics gathered before this migration would otherwise stay until dropped (ANALYZE
-- skips a column with STATISTICS 0 and leaves its old row). Removing them needs superuser;
-- without it they stay, and boxes created after them are planned as before this migration.
DO $$
BEGIN
    DELETE FROM pg_statistic s USING pg_attribute a
    WHERE s.starelid = a.attrelid AND s.staattnum = a.attnum AND a.attstattarget = 0 AND NOT s.stainherit
      AND a.attrelid IN ('messages'::regclass, 'attention'::regclass, 'receipts'::regclass, 'channel_sender_latest'::regclass,
                         'channels'::regclass, 'room_members'::regclass, 'rooms'::regclass, 'requests'::regclass,
                         'file_reports'::regclass, 'attachments'::regclass, 'agents'::regclass, 'sessions'::regclass,
                         'idempotency_records'::regclass);
EXCEPTION WHEN insufficient_privilege THEN
    NULL;
END
$$;

-- No index shares the primary key's (box_id, agent_id) prefix unless it has the primary
-- key's shape (inbox_seq next) or a partial predicate of its own. Statistics give every
-- owner the same small estimate (above), and at a row or two two indexes with that prefix
-- cost the same to the planner: it could answer a lookup by (box, agent, inbox_seq) — an
-- ACK, a lease, the foreign-key check of a receipt — by walking the agent's whole inbox in
-- the other index, checking inbox_seq on each entry. So the per-channel indexes lead with the
-- channel, and the one-row-per-(recipient, message) key leads with the message (it then
-- also serves retention's deletes by message, replacing attention_by_message: one index
-- entry fewer per attention row).
DROP INDEX attention_by_channel;
CREATE INDEX attention_by_channel ON attention (box_id, channel_id, agent_id, inbox_seq);
DROP INDEX attention_unread_by_channel;
CREATE INDEX attention_unread_by_channel ON attention (box_id, channel_id, agent_id, inbox_seq) WHERE acked_at IS NULL;
ALTER TABLE attention DROP CONSTRAINT attention_box_id_agent_id_message_id_key,
                      ADD CONSTRAINT attention_one_per_message UNIQUE (box_id, message_id, agent_id);
DROP INDEX attention_by_message;

-- A leaner send: the duplicate reference is upserted by every send. Its foreign key cost a
-- referential check per send and its message_id index an entry per send (and kept the
-- upsert from being a HOT update); EnforceRetention, the only statement that deletes
-- messages, now deletes the references of the messages it deletes itself, found by their
-- channel (the primary key's prefix), in the same statement (SPEC §11).
ALTER TABLE channel_sender_latest DROP CONSTRAINT channel_sender_latest_box_id_message_id_fkey;
DROP INDEX channel_sender_latest_message;
