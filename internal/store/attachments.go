package store

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/gen/db"
)

// Uploaded attachment bytes live in chunk rows (the attachment_chunks migration): an upload is
// streamed in with COPY, a download reads a window of chunks per statement, so neither holds a
// whole file in memory.

// AttachmentChunkBytes is the size of every chunk but an attachment's last.
const AttachmentChunkBytes = 256 << 10

// NewAttachment is the uploaded attachment of a send: shared metadata and the bytes, read
// once while the send's transaction stores them.
type NewAttachment struct {
	Name      string
	MediaType string
	SizeBytes int64
	SHA256    string // lowercase hex, computed by the transport while the upload streamed
	Content   io.Reader
}

// storeAttachments gives every stored copy of a send its own attachment: one metadata row
// per copy, the bytes streamed once into the first copy's chunks and copied on the server
// into each further copy's (a batch DM), so every copy is owned by its own message.
func (t *Tx) storeAttachments(ctx context.Context, boxID uuid.UUID, a *NewAttachment, messageIDs []uuid.UUID) error {
	attIDs := make([]uuid.UUID, len(messageIDs))
	for i := range attIDs {
		attIDs[i] = uuid.New()
	}
	if err := t.q.InsertAttachments(ctx, db.InsertAttachmentsParams{BoxID: boxID, AttName: a.Name, MediaType: a.MediaType,
		SizeBytes: a.SizeBytes, Sha256: a.SHA256, MessageIds: messageIDs, AttachmentIds: attIDs}); err != nil {
		return err
	}
	src := &chunkSource{boxID: boxID, attID: attIDs[0], r: a.Content, want: a.SizeBytes, buf: make([]byte, AttachmentChunkBytes)}
	n, err := t.c.conn.CopyFrom(ctx, pgx.Identifier{"attachment_chunks"}, []string{"box_id", "attachment_id", "chunk_index", "data"}, src)
	if err == nil {
		err = src.err
	}
	if err != nil {
		return err
	}
	if src.got != a.SizeBytes {
		return fmt.Errorf("store: attachment content is %d bytes, expected %d", src.got, a.SizeBytes)
	}
	if n == 0 || len(attIDs) == 1 {
		return nil
	}
	return t.q.CopyAttachmentChunks(ctx, db.CopyAttachmentChunksParams{BoxID: boxID, SourceID: attIDs[0], TargetIds: attIDs[1:]})
}

// chunkSource feeds COPY one chunk row at a time from the upload's reader.
type chunkSource struct {
	boxID, attID uuid.UUID
	r            io.Reader
	want, got    int64
	index        int32
	buf          []byte
	n            int
	err          error
}

func (s *chunkSource) Next() bool {
	if s.err != nil || s.got >= s.want {
		return false
	}
	n, err := io.ReadFull(s.r, s.buf[:min(int64(len(s.buf)), s.want-s.got)])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		s.err = err
		return false
	}
	if n == 0 {
		s.err = io.ErrUnexpectedEOF
		return false
	}
	s.n = n
	s.got += int64(n)
	return true
}

func (s *chunkSource) Values() ([]any, error) {
	i := s.index
	s.index++
	return []any{s.boxID, s.attID, i, s.buf[:s.n]}, nil
}

func (s *chunkSource) Err() error { return s.err }

// AttachmentMessageID is the message an attachment belongs to; ErrNotFound when it does not
// exist in the box (or was purged).
func (t *Tx) AttachmentMessageID(ctx context.Context, boxID, attachmentID uuid.UUID) (uuid.UUID, error) {
	return one(t.q.AttachmentMessage(ctx, db.AttachmentMessageParams{BoxID: boxID, AttachmentID: attachmentID}))
}

// AttachmentChunks reads up to max chunks of an attachment from chunk index from, in order,
// outside any transaction: a download reads its bytes window by window after its
// authorization committed, holding no connection while the client reads.
func (s *Store) AttachmentChunks(ctx context.Context, boxID, attachmentID uuid.UUID, from, max int32) ([][]byte, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	rows, err := db.New(s.pool).AttachmentChunks(ctx, db.AttachmentChunksParams{BoxID: boxID, AttachmentID: attachmentID, FromIndex: from, MaxChunks: max})
	if err != nil {
		return nil, classify(err, false) // a read: nothing to commit
	}
	out := make([][]byte, 0, len(rows))
	for i, r := range rows {
		if r.ChunkIndex != from+int32(i) { // a gap: the attachment was purged while being read
			break
		}
		out = append(out, r.Data)
	}
	return out, nil
}

// DeleteOversizedAttachmentMessages deletes, in the given locked channels, every message whose
// attachment exceeds maxBytes (whole, with everything that cascades from it) and returns how
// many were deleted.
func (t *Tx) DeleteOversizedAttachmentMessages(ctx context.Context, boxID uuid.UUID, channels []uuid.UUID, maxBytes int64) (int64, error) {
	return t.q.DeleteOversizedAttachmentMessages(ctx, db.DeleteOversizedAttachmentMessagesParams{BoxID: boxID, ChannelIds: channels, MaxBytes: maxBytes})
}
