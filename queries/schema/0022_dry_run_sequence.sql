-- A dry run allocates no IDs (SPEC §10): it runs the real send in a transaction that is then
-- rolled back, but a sequence is not transactional, so drawing its message_seq and inbox_seq
-- values from message_seq_seq and inbox_seq_seq would make the next real values skip. It draws
-- them here instead: from the negative numbers, which no stored row ever has, so they collide
-- with nothing the dry run's statements read or check. Nothing drawn here is ever stored.
CREATE SEQUENCE dry_run_seq AS bigint INCREMENT BY -1 MINVALUE -9223372036854775808 MAXVALUE -1 START WITH -1 CYCLE;
