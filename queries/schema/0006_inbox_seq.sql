-- Inbox sequence without a per-recipient lock held through commit (SPEC §7, §9). This replaces
-- the inbox half of 0002's ordering rule; the channel half is unchanged.
--
-- Ordering rules: a send locks its channel row first (SELECT … FOR UPDATE; message_seq from
-- message_seq_seq after that lock, so message_seq values become visible in commit order per
-- channel and channels.last_message_seq is a channel stream's upper bound). Then, for every
-- recipient in agent_id order, it takes the SHARED transaction-level advisory lock
-- inbox_lock_key(box, agent) and only after it draws that recipient's inbox_seq from the global
-- sequence inbox_seq_seq. Shared locks do not conflict, so sends to one agent no longer
-- serialize on each other. A stream reader that needs an inbox upper bound calls
-- inbox_upper(box, agent): it takes the same key EXCLUSIVELY (session level), which waits
-- for every in-flight sender to that inbox to commit or abort and admits no new one, reads the
-- sequence's current value and unlocks. Every attention row of the agent at or below that
-- value is then committed (or aborted) and visible to the reader's next statement, and every
-- later send draws a larger value. Deadlock-free: senders take the channel lock and then the
-- shared locks in one fixed order, and a reader holds only its one lock while it waits.
-- CACHE 1 matters: with cached blocks a backend could draw a value below another backend's
-- last_value after the reader read it.

CREATE SEQUENCE inbox_seq_seq AS bigint CACHE 1;

-- Continue above every inbox_seq handed out so far (heads are at or above their rows), so
-- existing cursors keep their meaning.
SELECT setval('inbox_seq_seq', top)
FROM (SELECT COALESCE(GREATEST((SELECT max(last_inbox_seq) FROM inbox_heads), (SELECT max(inbox_seq) FROM attention)), 0) AS top) AS t
WHERE top > 0;

DROP TABLE inbox_heads;

-- The advisory-lock key of an agent's inbox. Its own text prefix and hash seed keep it apart
-- from the other advisory-lock users (idempotency keys: seed 0; migrations and test
-- templates: fixed constants); a collision would only make unrelated calls wait.
CREATE FUNCTION inbox_lock_key(box uuid, agent uuid) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT hashtextextended('inbox/' || box::text || '/' || agent::text, 1) $$;

-- The committed upper bound of an agent's inbox stream (see the rule above).
CREATE FUNCTION inbox_upper(box uuid, agent uuid) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    key   bigint := inbox_lock_key(box, agent);
    upper bigint;
BEGIN
    PERFORM pg_advisory_lock(key);
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO upper FROM inbox_seq_seq;
    PERFORM pg_advisory_unlock(key);
    RETURN upper;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    -- A session-level lock outlives the statement: never leave it behind. (When the wait
    -- itself was cancelled nothing is held and this unlock only warns.)
    PERFORM pg_advisory_unlock(key);
    RAISE;
END
$$;
