-- An idempotency record keeps the whole response of its call, and an inbox_claim answers a
-- message per row (about 25 KB for 50 rows in the benchmark's drain): PostgreSQL compresses a
-- value that large before storing it, with pglz by default. lz4 does it in less than half
-- the time for as small a result (2,000 inserts of a 13.5 KB claim-shaped JSON on this
-- machine: pglz 207 ms and 4.8 KB each, lz4 86 ms and 5.0 KB), and decompresses faster on a
-- replay. Small responses (a send's) are not compressed either way. A PostgreSQL built
-- without lz4 refuses the setting: it then keeps pglz.
DO $$
BEGIN
    ALTER TABLE idempotency_records ALTER COLUMN response SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: idempotency records stay pglz-compressed';
END $$;
