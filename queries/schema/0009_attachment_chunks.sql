-- Uploaded attachment bytes (SPEC §6, §14): stored in PostgreSQL with their message, in
-- chunk rows of at most 256 KiB, so an upload is written and a download is read a bounded
-- piece at a time (no statement carries a whole file). A message's attachment row cascades
-- from the message and its chunks from the attachment row: deleting a message deletes its
-- bytes in the same transaction, and no chunk outlives its message.

ALTER TABLE attachments DROP COLUMN content;

CREATE TABLE attachment_chunks (
    box_id        uuid NOT NULL,
    attachment_id uuid NOT NULL,
    chunk_index   integer NOT NULL CHECK (chunk_index >= 0),
    data          bytea NOT NULL,
    PRIMARY KEY (box_id, attachment_id, chunk_index),
    FOREIGN KEY (box_id, attachment_id) REFERENCES attachments (box_id, attachment_id) ON DELETE CASCADE
);
-- Uploads are stored as sent; most are already compressed, so skip TOAST compression.
ALTER TABLE attachment_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
