-- Per-key rate limit state shared by every server process (SPEC §11): one token bucket per
-- API key, taken by a single upsert per request while the box's limit is on, so N
-- instances behind a load balancer enforce one limit, not N of them. Deleting a key or its
-- box deletes its bucket.
CREATE TABLE rate_buckets (
    box_id      uuid NOT NULL,
    key_id      uuid NOT NULL,
    tokens      double precision NOT NULL,
    updated_at  timestamptz NOT NULL,
    refused     boolean NOT NULL DEFAULT false, -- the last take found no token
    PRIMARY KEY (box_id, key_id),
    FOREIGN KEY (box_id, key_id) REFERENCES api_keys (box_id, key_id) ON DELETE CASCADE
);
