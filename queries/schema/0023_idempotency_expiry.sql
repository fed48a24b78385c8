-- Expired idempotency records are deleted (SPEC §10: kept for idempotency_retention_seconds),
-- a bounded batch at a time, by the sweeper every server process runs (internal/store
-- idempotency_expiry.go). A batch is the box's oldest expired records, read from
-- idempotency_records_expiry (box_id, expires_at) in its own order and stopped at max_rows.
-- Written as a plain statement, the planner chose otherwise: every box is estimated at a few
-- hundred rows (no statistics on box_id: 0010_inbox_paths.sql), and for so few a bitmap scan
-- of the whole expired range plus a sort costs less than the ordered index scan, so each
-- batch of 1,000 read and sorted all of a box's expired records (101,388 of them: 5,400
-- buffers and a 3 MB external sort, 40-190 ms per batch, for a sweep quadratic in the
-- backlog). With sorting disabled (the SET clause, restored on return) the one sort-free plan
-- is the index range in its order, generic or custom, like 0021_lease_lookups_by_expiry_only.sql:
-- 46 index buffers for the same batch. Rows are deleted by position, each condition checked
-- again on the row found there; rows another sweeper (another server process) or a call
-- replacing the record holds are skipped, so concurrent sweepers split the work and never wait
-- for each other.
CREATE FUNCTION idempotency_delete_expired(box uuid, at timestamptz, max_rows integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_incremental_sort = off
AS $$
DECLARE
    deleted bigint;
BEGIN
    DELETE FROM idempotency_records r
    WHERE r.ctid = ANY (ARRAY(SELECT e.ctid FROM idempotency_records e
                              WHERE e.box_id = box AND e.expires_at <= at
                              ORDER BY e.expires_at
                              LIMIT max_rows
                              FOR UPDATE SKIP LOCKED))
      AND r.box_id = box AND r.expires_at <= at;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END
$$;
