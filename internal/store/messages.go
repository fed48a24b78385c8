package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Message is a stored message with its sender's name.
type Message struct {
	ID            uuid.UUID
	Seq           int64
	ChannelID     uuid.UUID
	SenderID      uuid.UUID
	SenderName    string
	DestKind      string     // dm | room
	DestAgentID   *uuid.UUID // dm
	DestRoomID    *uuid.UUID // room
	Body          string
	Payload       json.RawMessage // nil when the message has none
	Mentions      []uuid.UUID
	Requests      []uuid.UUID
	ReplyTo       *uuid.UUID
	ReplyToAuthor *uuid.UUID
	ThreadRoot    uuid.UUID
	Files         json.RawMessage // the stored file references (output form)
	Attachment    *AttachmentMeta
	CreatedAt     time.Time
}

// AttachmentMeta describes an uploaded attachment without its bytes.
type AttachmentMeta struct {
	ID        uuid.UUID
	Name      string
	MediaType string
	SizeBytes int64
	SHA256    string
}

func messageFrom(m db.Message, sender string, attID *uuid.UUID, name, mediaType *string, size *int64, sha *string) Message {
	out := Message{ID: m.MessageID, Seq: m.MessageSeq, ChannelID: m.ChannelID, SenderID: m.SenderAgentID, SenderName: sender,
		DestKind: m.DestKind, DestAgentID: m.DestAgentID, DestRoomID: m.DestRoomID, Body: m.BodyMd, Mentions: m.MentionAgentIds,
		Requests: m.RequestAgentIds, ReplyTo: m.ReplyToMessageID, ReplyToAuthor: m.ReplyToAuthorID, ThreadRoot: m.ThreadRootID,
		Files: m.Files, CreatedAt: m.CreatedAt}
	if m.Payload != nil {
		out.Payload = json.RawMessage(m.Payload)
	}
	if attID != nil {
		out.Attachment = &AttachmentMeta{ID: *attID, Name: *name, MediaType: *mediaType, SizeBytes: *size, SHA256: *sha}
	}
	return out
}

// DMPair orders two agents as a DM channel stores them (lo < hi).
func DMPair(a, b uuid.UUID) (lo, hi uuid.UUID) {
	if bytes.Compare(a[:], b[:]) < 0 { // uuid order in PostgreSQL is byte order
		return a, b
	}
	return b, a
}

// LockedChannel is a channel locked until commit, with its committed head.
type LockedChannel struct {
	ID   uuid.UUID
	Lo   uuid.UUID // DM pair
	Hi   uuid.UUID
	Head int64
}

// LockDMChannels locks the DM channels between agent and each peer until commit, creating the
// missing ones first, and returns them keyed by peer. Every channel is locked in channel_id
// order and before any inbox lock (see InsertAttention), so concurrent sends cannot deadlock.
func (t *Tx) LockDMChannels(ctx context.Context, boxID, agent uuid.UUID, peers []uuid.UUID, now time.Time) (map[uuid.UUID]LockedChannel, error) {
	los, his := make([]uuid.UUID, len(peers)), make([]uuid.UUID, len(peers))
	for i, p := range peers {
		los[i], his[i] = DMPair(agent, p)
	}
	lock := func() (map[uuid.UUID]LockedChannel, error) {
		rows, err := t.q.LockDMChannels(ctx, db.LockDMChannelsParams{BoxID: boxID, Los: los, His: his})
		out := make(map[uuid.UUID]LockedChannel, len(rows))
		for _, r := range rows {
			ch := LockedChannel{ID: r.ChannelID, Lo: *r.DmAgentLo, Hi: *r.DmAgentHi, Head: r.LastMessageSeq}
			peer := ch.Lo
			if peer == agent {
				peer = ch.Hi
			}
			out[peer] = ch
		}
		return out, err
	}
	ensure := func() error {
		return t.q.EnsureDMChannels(ctx, db.EnsureDMChannelsParams{BoxID: boxID, Los: los, His: his, Now: now})
	}
	// Creating a channel may wait on another transaction creating the same pair; a batch
	// therefore creates before it locks anything, so it never waits while holding a lock.
	// A single send locks first (the common case: the channel exists) and, when the
	// channel is missing, holds nothing yet.
	if len(peers) > 1 {
		if err := ensure(); err != nil {
			return nil, err
		}
	}
	got, err := lock()
	if err != nil || len(got) == len(peers) {
		return got, err
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	return lock()
}

// DMSend is what a DM checks once the pair's channel is locked.
type DMSend struct {
	Enabled bool          // the recipient is an enabled agent of the box
	Channel LockedChannel // the pair's channel (zero when the recipient is not enabled)
	Latest  *LatestSent   // the sender's duplicate reference in it; nil when none
}

// LockDMForSend checks that recipient is an enabled agent of the box, locks the pair's DM
// channel until commit and reads the sender's duplicate reference in it: separate statements
// in one round trip, the reference read after the lock was granted (pipeline.go). The pair's
// first message creates the channel first (one more round trip), as LockDMChannels does.
func (t *Tx) LockDMForSend(ctx context.Context, boxID, sender, recipient uuid.UUID, now time.Time) (DMSend, error) {
	return t.QueueDMForSend(ctx, boxID, sender, recipient, now).Result(ctx, t)
}

// DMSendLock is LockDMForSend queued to ride in the transaction's next round trip.
type DMSendLock struct {
	q      *queued
	out    DMSend
	found  bool
	create []step // the pair's first message: create the channel, then lock and read
}

// QueueDMForSend queues LockDMForSend's first round trip behind the transaction's next one;
// Result returns what LockDMForSend would (sending the statements now if no round trip did,
// and creating the pair's channel on its first message).
func (t *Tx) QueueDMForSend(ctx context.Context, boxID, sender, recipient uuid.UUID, now time.Time) *DMSendLock {
	lo, hi := DMPair(sender, recipient)
	d := &DMSendLock{}
	out, found := &d.out, &d.found
	lock := func(q *db.Queries) error {
		rows, err := q.LockDMChannels(ctx, db.LockDMChannelsParams{BoxID: boxID, Los: []uuid.UUID{lo}, His: []uuid.UUID{hi}})
		*found = len(rows) == 1
		if *found {
			out.Channel = LockedChannel{ID: rows[0].ChannelID, Lo: lo, Hi: hi, Head: rows[0].LastMessageSeq}
		}
		return err
	}
	latest := func(q *db.Queries) error {
		rows, err := q.DMSenderLatest(ctx, db.DMSenderLatestParams{BoxID: boxID, SenderAgentID: sender, Lo: &lo, Hi: &hi})
		out.Latest = nil
		for _, r := range rows {
			out.Latest = &LatestSent{MessageID: r.MessageID, Seq: r.MessageSeq, CreatedAt: r.CreatedAt, ContentHash: r.ContentHash}
		}
		return err
	}
	enabled := func(q *db.Queries) (err error) {
		out.Enabled, err = q.AgentEnabled(ctx, db.AgentEnabledParams{BoxID: boxID, AgentID: recipient})
		return err
	}
	// The pair's first message: nothing is locked yet, so waiting on a concurrent creator is safe.
	ensure := func(q *db.Queries) error {
		return q.EnsureDMChannels(ctx, db.EnsureDMChannelsParams{BoxID: boxID, Los: []uuid.UUID{lo}, His: []uuid.UUID{hi}, Now: now})
	}
	d.create = []step{ensure, lock, latest}
	d.q = t.queue(enabled, lock, latest)
	return d
}

// Result is the locked pair's DMSend (the channel zero when the recipient is not enabled).
func (d *DMSendLock) Result(ctx context.Context, t *Tx) (DMSend, error) {
	if err := d.q.run(ctx, t); err != nil || d.found || !d.out.Enabled {
		if !d.out.Enabled {
			d.out.Channel = LockedChannel{}
		}
		return d.out, err
	}
	if err := t.pipeline(ctx, d.create...); err != nil {
		return d.out, err
	}
	if !d.found {
		return d.out, errors.New("store: DM channel missing after creation")
	}
	return d.out, nil
}

// DMChannelHead is the channel of a DM pair and its committed head; ErrNotFound before the
// pair's first message.
func (t *Tx) DMChannelHead(ctx context.Context, boxID, a, b uuid.UUID) (uuid.UUID, int64, error) {
	lo, hi := DMPair(a, b)
	r, err := one(t.q.DMChannelHead(ctx, db.DMChannelHeadParams{BoxID: boxID, Lo: &lo, Hi: &hi}))
	return r.ChannelID, r.LastMessageSeq, err
}

// LatestSent is a sender's latest retained message in a channel (the duplicate reference).
type LatestSent struct {
	MessageID   uuid.UUID
	Seq         int64
	CreatedAt   time.Time
	ContentHash []byte
}

// SenderLatest returns the sender's duplicate reference in each of the channels that has one.
func (t *Tx) SenderLatest(ctx context.Context, boxID, sender uuid.UUID, channels []uuid.UUID) (map[uuid.UUID]LatestSent, error) {
	rows, err := t.q.SenderLatest(ctx, db.SenderLatestParams{BoxID: boxID, SenderAgentID: sender, ChannelIds: channels})
	out := make(map[uuid.UUID]LatestSent, len(rows))
	for _, r := range rows {
		out[r.ChannelID] = LatestSent{MessageID: r.MessageID, Seq: r.MessageSeq, CreatedAt: r.CreatedAt, ContentHash: r.ContentHash}
	}
	return out, err
}

// MessageCopy is one stored copy of a send: its channel and destination as sent.
type MessageCopy struct {
	ID          uuid.UUID
	ChannelID   uuid.UUID
	DestAgentID uuid.UUID // DM recipient (uuid.Nil for a room)
	DestRoomID  uuid.UUID // room (uuid.Nil for a DM)
}

// NewMessages is the shared content of a send and its copies.
type NewMessages struct {
	BoxID         uuid.UUID
	SenderID      uuid.UUID
	DestKind      string // dm | room
	Copies        []MessageCopy
	Body          string
	Payload       []byte // compact JSON, nil when absent
	Mentions      []uuid.UUID
	Requests      []uuid.UUID
	ReplyTo       *uuid.UUID
	ReplyToAuthor *uuid.UUID
	ThreadRoot    *uuid.UUID // nil: each message starts its own thread
	Files         []byte     // JSON array of the output file references
	ContentHash   []byte
	Attachment    *NewAttachment // the uploaded attachment every copy gets its own copy of; nil when none
	// DryRun draws the sequence values from dry_run_seq (0022_dry_run_sequence.sql): the
	// transaction is rolled back, and the real sequences must not skip what it drew.
	DryRun bool
}

// Sent is a stored message's identity.
type Sent struct {
	MessageID uuid.UUID
	Seq       int64
	ChannelID uuid.UUID
	CreatedAt time.Time // as stored (microseconds)
}

// SendResult is what one delivery stored.
type SendResult struct {
	Sent      []Sent
	Attention int64
	Requests  int64
}

// DeliverMessages stores the copies of a send with their attention rows and request rows,
// then applies retention to the channels a copy took over a cap — a fixed number of
// statements whatever the room size or number of copies. The caller holds the channels'
// locks (LockChannel or LockDMChannels).
func (t *Tx) DeliverMessages(ctx context.Context, n NewMessages, messageCap, attachmentCap int64, now time.Time) (SendResult, error) {
	k := len(n.Copies)
	ids, channels, destAgents, destRooms := make([]uuid.UUID, k), make([]uuid.UUID, k), make([]uuid.UUID, k), make([]uuid.UUID, k)
	for i, c := range n.Copies {
		ids[i], channels[i], destAgents[i], destRooms[i] = c.ID, c.ChannelID, c.DestAgentID, c.DestRoomID
	}
	mentions, requests := nonNil(n.Mentions), nonNil(n.Requests)
	attention := db.InsertAttentionParams{BoxID: n.BoxID, SenderAgentID: n.SenderID, MentionAgentIds: mentions,
		ReplyToAuthorID: n.ReplyToAuthor, RequestAgentIds: requests,
		DmMessageIds: []uuid.UUID{}, DmChannelIds: []uuid.UUID{}, DmRecipientIds: []uuid.UUID{}, DryRun: n.DryRun}
	if n.DestKind == "room" { // a room post has one copy
		attention.RoomMessageID, attention.RoomID = ids[0], channels[0]
	} else {
		attention.DmMessageIds, attention.DmChannelIds, attention.DmRecipientIds = ids, channels, destAgents
	}
	var rows []db.InsertMessagesRow
	var res SendResult
	// The messages, then their attention rows: two statements, one round trip.
	err := t.pipeline(ctx,
		func(q *db.Queries) (err error) {
			rows, err = q.InsertMessages(ctx, db.InsertMessagesParams{MessageIds: ids, ChannelIds: channels, DestAgentIds: destAgents,
				DestRoomIds: destRooms, BoxID: n.BoxID, SenderAgentID: n.SenderID, DestKind: n.DestKind, BodyMd: n.Body,
				Payload: n.Payload, MentionAgentIds: mentions, RequestAgentIds: requests, ReplyToMessageID: n.ReplyTo,
				ReplyToAuthorID: n.ReplyToAuthor, ThreadRootID: n.ThreadRoot, Files: n.Files, ContentHash: n.ContentHash,
				HasAttachment: n.Attachment != nil, Now: now, DryRun: n.DryRun})
			return err
		},
		func(q *db.Queries) (err error) {
			res.Attention, err = q.InsertAttention(ctx, attention)
			return err
		})
	if err != nil {
		return SendResult{}, err
	}
	res.Requests = int64(len(requests) * len(rows))
	if n.Attachment != nil { // stored before retention, which may delete the oldest attachment messages
		copies := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			copies[i] = r.MessageID
		}
		if err := t.storeAttachments(ctx, n.BoxID, n.Attachment, copies); err != nil {
			return SendResult{}, err
		}
	}
	var over []uuid.UUID // channels past a cap: only they need the retention statement
	for _, r := range rows {
		res.Sent = append(res.Sent, Sent{MessageID: r.MessageID, Seq: r.MessageSeq, ChannelID: r.ChannelID, CreatedAt: r.CreatedAt})
		if r.MessageCount > messageCap || r.AttachmentMessageCount > attachmentCap {
			over = append(over, r.ChannelID)
		}
	}
	if len(over) == 0 {
		return res, nil
	}
	deleted, err := t.EnforceRetention(ctx, n.BoxID, over, messageCap, attachmentCap)
	if err == nil && deleted > 0 { // a run that deleted something is counted in the box's cleanup status
		err = t.RecordCleanupRun(ctx, n.BoxID, deleted, false, now)
	}
	return res, err
}

// EnforceRetention deletes the oldest messages of each channel beyond the caps (SPEC §11),
// keeping the channels' message counts exact, and returns how many were deleted.
func (t *Tx) EnforceRetention(ctx context.Context, boxID uuid.UUID, channels []uuid.UUID, messageCap, attachmentCap int64) (int64, error) {
	return t.q.EnforceRetention(ctx, db.EnforceRetentionParams{BoxID: boxID, ChannelIds: channels,
		MessageCap: messageCap, AttachmentCap: attachmentCap})
}

// MessageByID loads one message; ErrNotFound when it does not exist in the box (or was purged).
func (t *Tx) MessageByID(ctx context.Context, boxID, id uuid.UUID) (Message, error) {
	r, err := one(t.q.GetMessage(ctx, db.GetMessageParams{BoxID: boxID, MessageID: id}))
	if err != nil {
		return Message{}, err
	}
	return messageFrom(r.Message, r.SenderName, r.AttachmentID, r.AttachmentName, r.AttachmentMediaType, r.AttachmentSizeBytes, r.AttachmentSha256), nil
}

// SeqRange is a keyset window of a stream: message_seq in (After, Upper], at most Max rows.
type SeqRange struct {
	After, Upper int64
	Max          int32
}

// ChannelMessages reads a window of a channel's stream in ascending message_seq.
func (t *Tx) ChannelMessages(ctx context.Context, boxID, channelID uuid.UUID, w SeqRange) ([]Message, error) {
	rows, err := t.q.ChannelMessages(ctx, db.ChannelMessagesParams{BoxID: boxID, ChannelID: channelID, After: w.After, Upper: w.Upper, MaxRows: w.Max})
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, messageFrom(r.Message, r.SenderName, r.AttachmentID, r.AttachmentName, r.AttachmentMediaType, r.AttachmentSizeBytes, r.AttachmentSha256))
	}
	return out, err
}

// ThreadMessages reads a window of a thread family (root and replies) in ascending message_seq.
func (t *Tx) ThreadMessages(ctx context.Context, boxID, channelID, root uuid.UUID, w SeqRange) ([]Message, error) {
	rows, err := t.q.ThreadMessages(ctx, db.ThreadMessagesParams{BoxID: boxID, ChannelID: channelID, ThreadRootID: root,
		After: w.After, Upper: w.Upper, MaxRows: w.Max})
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, messageFrom(r.Message, r.SenderName, r.AttachmentID, r.AttachmentName, r.AttachmentMediaType, r.AttachmentSizeBytes, r.AttachmentSha256))
	}
	return out, err
}

// VisibleChannelMessages returns which of ids still exist in the channel above floor.
func (t *Tx) VisibleChannelMessages(ctx context.Context, boxID, channelID uuid.UUID, floor int64, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := t.q.VisibleChannelMessageIDs(ctx, db.VisibleChannelMessageIDsParams{BoxID: boxID, ChannelID: channelID, Floor: floor, MessageIds: ids})
	for _, id := range rows {
		out[id] = true
	}
	return out, err
}

// RecordReceipts records that session was shown the caller's attention rows of these messages.
func (t *Tx) RecordReceipts(ctx context.Context, boxID, agentID, sessionID uuid.UUID, messageIDs []uuid.UUID) error {
	if len(messageIDs) == 0 {
		return nil
	}
	return t.q.RecordReceipts(ctx, db.RecordReceiptsParams{BoxID: boxID, AgentID: agentID, SessionID: sessionID, MessageIds: messageIDs})
}

func nonNil(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}
