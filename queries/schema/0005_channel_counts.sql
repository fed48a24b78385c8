-- Retention only when needed (SPEC §11): each channel counts its messages and its messages
-- with attachments. A send adds its copies to the counts of the channels it has locked
-- (InsertMessages) and every deletion subtracts what it deleted (EnforceRetention, the only
-- statement that deletes messages), so a channel needs the deletion query only when a count
-- exceeds its cap, and then deletes exactly the excess oldest messages.

ALTER TABLE channels
    ADD COLUMN message_count            bigint NOT NULL DEFAULT 0,
    ADD COLUMN attachment_message_count bigint NOT NULL DEFAULT 0;

UPDATE channels c
SET message_count = m.n, attachment_message_count = m.a
FROM (SELECT box_id, channel_id, count(*) AS n, count(*) FILTER (WHERE has_attachment) AS a
      FROM messages GROUP BY box_id, channel_id) AS m
WHERE c.box_id = m.box_id AND c.channel_id = m.channel_id;
