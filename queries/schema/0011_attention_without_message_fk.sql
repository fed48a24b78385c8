-- A leaner send (issue 10): a room post inserts one attention row per member, and the foreign
-- key to messages ran one referential check per row (a query locking the message row the same
-- statement's transaction had just inserted). An attention row is only ever written by the
-- send that writes its message, in the same transaction, so the key guarded nothing a send
-- could break; what it did at a purge — delete the message's attention rows — the two
-- statements that delete messages (EnforceRetention, DeleteOversizedAttachmentMessages) now do
-- themselves, in the same statement. Receipts still cascade from the attention rows (SPEC §11).
ALTER TABLE attention DROP CONSTRAINT attention_box_id_message_id_fkey;
