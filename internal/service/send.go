package service

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/upload"
)

// Sending (SPEC §6, §7, §11). A send is one transaction: validate everything (content, then
// destination and targets), lock the channel, compare with the sender's latest message in the
// channel (consecutive-duplicate suppression), then store the message, its attention rows and
// request rows and apply retention — all after the channel lock and before commit, so
// message_seq is commit-ordered per channel and two identical concurrent sends cannot both
// pass the comparison. The number of statements does not depend on the room size.

// MessageSend sends one message to a DM recipient or a room, all-or-nothing.
// With an uploaded attachment (a multipart request; the transport staged the file) the
// message and its attachment are stored together or not at all.
func (s *Service) MessageSend(ctx context.Context, req api.MessageSendRequestObject) (api.MessageSendResponseObject, error) {
	if req.JSONBody == nil { // multipart bodies are staged by the transport and arrive as JSON
		return nil, apierr.Invalid("", "the request body must be JSON or a staged multipart upload")
	}
	in := *req.JSONBody
	att := upload.FileFrom(ctx)
	dryRun := deref(in.DryRun)
	args := in
	args.IdempotencyKey, args.DryRun = "", nil
	args.Files, args.MentionAgentIds, args.RequestAgentIds = emptyAsAbsent(args.Files), emptyAsAbsent(args.MentionAgentIds), emptyAsAbsent(args.RequestAgentIds)
	m := mutation{op: "message_send", idempotencyKey: in.IdempotencyKey, args: withAttachment(args, att), dryRun: dryRun}
	var locks queuedLocks
	m.queue = func(ctx context.Context, tx *store.Tx, p auth.Principal, now time.Time) {
		locks = queueSendLock(ctx, tx, p, in, now)
	}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.MessageSendResult, error) {
		res, err := s.send(ctx, tx, c, in, att, locks)
		if err != nil || !dryRun {
			return res, err
		}
		// The dry run did everything the real send does; the transaction is rolled back
		// and the would-be result carries no allocated identifiers.
		return api.MessageSendResult{DryRun: &dryRun, Status: res.Status, AttentionCount: res.AttentionCount, RequestCount: res.RequestCount}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sendPlan is a send whose destination, targets and parent are resolved and whose channel is locked.
type sendPlan struct {
	kind   string      // dm | room
	view   channelView // the sender's view of the destination channel
	copy   store.MessageCopy
	reply  *store.Message
	latest *store.LatestSent // the sender's duplicate reference in the channel, read after the lock
}

// queuedLocks is a send's channel lock queued to ride in the mutation's first round trip
// (mutation.queue); planDM and planRoom take their lock from it when it is for their
// destination and targets, and lock now otherwise.
type queuedLocks struct {
	dmRecipient uuid.UUID
	dm          *store.DMSendLock
	room        uuid.UUID
	roomTargets []uuid.UUID
	roomLock    *store.RoomSendLock
}

// queueSendLock queues the lock of the send's destination when the input names one. Nothing
// is checked here: the send's own checks run on the results, in their usual order.
func queueSendLock(ctx context.Context, tx *store.Tx, p auth.Principal, in api.MessageSendInput, now time.Time) queuedLocks {
	dest, err := parseDestination(in.Destination, "destination")
	switch {
	case err != nil:
		return queuedLocks{}
	case dest.kind == "dm" && dest.id != p.AgentID:
		return queuedLocks{dmRecipient: dest.id, dm: tx.QueueDMForSend(ctx, p.BoxID, p.AgentID, dest.id, now)}
	case dest.kind == "room":
		var targets []uuid.UUID
		if in.MentionAgentIds != nil {
			targets = *in.MentionAgentIds
		}
		return queuedLocks{room: dest.id, roomTargets: targets, roomLock: tx.QueueRoomForSend(ctx, p.BoxID, dest.id, p.AgentID, targets)}
	}
	return queuedLocks{}
}

func (s *Service) send(ctx context.Context, tx *store.Tx, c *call, in api.MessageSendInput, att *upload.File, locks queuedLocks) (api.MessageSendResult, error) {
	dest, err := parseDestination(in.Destination, "destination")
	if err != nil {
		return api.MessageSendResult{}, err
	}
	cont, err := validateContent(in.BodyMd, in.Payload, in.Files, att, c.settings)
	if err != nil {
		return api.MessageSendResult{}, err
	}
	t, err := checkTargetArrays(in.MentionAgentIds, in.RequestAgentIds, c.p.AgentID, c.settings)
	if err != nil {
		return api.MessageSendResult{}, err
	}
	if err := checkEnvelope(cont, t, nil, c.settings); err != nil {
		return api.MessageSendResult{}, err
	}
	var plan sendPlan
	if dest.kind == "dm" {
		plan, err = planDM(ctx, tx, c, dest.id, t, locks)
	} else {
		plan, err = planRoom(ctx, tx, c, dest.id, t, locks)
	}
	if err != nil {
		return api.MessageSendResult{}, err
	}
	if in.ReplyToMessageId != nil {
		if plan.reply, err = replyParent(ctx, tx, c, *in.ReplyToMessageId, plan.view); err != nil {
			return api.MessageSendResult{}, err
		}
	}
	if l := plan.latest; l != nil && bytes.Equal(l.ContentHash, cont.hash) {
		seq, at := dec(l.Seq), l.CreatedAt.UTC()
		return api.MessageSendResult{Status: api.SendStatusDuplicate, MessageId: &l.MessageID, MessageSeq: &seq, CreatedAt: &at}, nil
	}
	res, err := deliverPlan(ctx, tx, c, plan, cont, t)
	if err != nil {
		return api.MessageSendResult{}, err
	}
	sent := res.Sent[0]
	seq, at := dec(sent.Seq), sent.CreatedAt.UTC()
	return api.MessageSendResult{Status: api.SendStatusSent, MessageId: &sent.MessageID, MessageSeq: &seq,
		CreatedAt: &at, AttentionCount: res.Attention, RequestCount: res.Requests}, nil
}

// deliverPlan stores one planned message (its channel locked by the plan) with its attention
// rows, request rows and retention: the one insert path of message_send, shared with the
// reply request_respond posts.
func deliverPlan(ctx context.Context, tx *store.Tx, c *call, plan sendPlan, cont sendContent, t sendTargets) (store.SendResult, error) {
	n, err := newMessages(c, cont, plan.kind, []store.MessageCopy{plan.copy})
	if err != nil {
		return store.SendResult{}, err
	}
	n.Mentions, n.Requests = t.mentions, t.requests
	if p := plan.reply; p != nil {
		n.ReplyTo, n.ReplyToAuthor, n.ThreadRoot = &p.ID, &p.SenderID, &p.ThreadRoot
	}
	return tx.DeliverMessages(ctx, n, c.settings.ChannelMessageCap, c.settings.ChannelAttachmentCap, c.now)
}

// planDM resolves a DM: the recipient is another enabled agent of the box and the only agent
// the targets may name (a DM request needs no mention). Locks the pair's channel, creating it
// on the first message, and reads the sender's duplicate reference in it.
func planDM(ctx context.Context, tx *store.Tx, c *call, recipient uuid.UUID, t sendTargets, locks queuedLocks) (sendPlan, error) {
	if recipient == c.p.AgentID {
		return sendPlan{}, apierr.Invalid("destination.recipient_agent_id", "an agent cannot send a DM to itself").WithReason("self_target")
	}
	for _, arr := range []struct {
		field string
		ids   []uuid.UUID
	}{{"mention_agent_ids", t.mentions}, {"request_agent_ids", t.requests}} {
		for i, id := range arr.ids {
			if id != recipient {
				return sendPlan{}, apierr.Invalid(fieldIndex(arr.field, i), "in a DM only the recipient may be targeted").WithReason("dm_target_not_recipient")
			}
		}
	}
	var dm store.DMSend
	var err error
	if locks.dm != nil && locks.dmRecipient == recipient {
		dm, err = locks.dm.Result(ctx, tx)
	} else {
		dm, err = tx.LockDMForSend(ctx, c.p.BoxID, c.p.AgentID, recipient, c.now)
	}
	if err != nil {
		return sendPlan{}, err
	}
	if !dm.Enabled {
		return sendPlan{}, apierr.NotFound().WithField("destination.recipient_agent_id")
	}
	ch := dm.Channel
	return sendPlan{kind: "dm", view: channelView{channelID: ch.ID}, latest: dm.Latest,
		copy: store.MessageCopy{ID: newMessageID(), ChannelID: ch.ID, DestAgentID: recipient}}, nil
}

// planRoom resolves a room post: the caller is an active member of a non-archived room, every
// target is an active member, and every requested agent is also mentioned. The room's
// channel is locked first, so membership cannot change before commit; what the checks read
// comes in the lock's round trip (store.LockRoomForSend).
func planRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID, t sendTargets, locks queuedLocks) (sendPlan, error) {
	for i, id := range t.requests {
		if !slices.Contains(t.mentions, id) {
			return sendPlan{}, apierr.Invalid(fieldIndex("request_agent_ids", i), "in a room every requested agent must also be mentioned").
				WithReason("request_not_mentioned")
		}
	}
	var rs store.RoomSend
	var err error
	if locks.roomLock != nil && locks.room == roomID && slices.Equal(locks.roomTargets, t.mentions) {
		rs, err = locks.roomLock.Result(ctx, tx)
	} else {
		rs, err = tx.LockRoomForSend(ctx, c.p.BoxID, roomID, c.p.AgentID, t.mentions) // requests ⊆ mentions: every target
	}
	if err == store.ErrNotFound {
		return sendPlan{}, apierr.NotFound()
	}
	if err != nil {
		return sendPlan{}, err
	}
	r, err := checkVisible(rs.Room, nil)
	if err != nil {
		return sendPlan{}, err
	}
	if err := requireWritable(r); err != nil {
		return sendPlan{}, err
	}
	for i, id := range t.mentions {
		if rs.States[id] != "active" {
			return sendPlan{}, apierr.Invalid(fieldIndex("mention_agent_ids", i), "every target must be an active member of the room").
				WithReason("target_not_member")
		}
	}
	return sendPlan{kind: "room", view: roomView(r), latest: rs.Latest, copy: store.MessageCopy{ID: newMessageID(), ChannelID: r.ID, DestRoomID: r.ID}}, nil
}

// replyParent checks a reply: the parent must be visible to the sender now (else the uniform
// NOT_FOUND_OR_FORBIDDEN) and in the same channel — same room or same DM pair (else
// reply_outside_channel). dest is the sender's view of the destination channel, already
// authorized, so the common case costs one lookup.
func replyParent(ctx context.Context, tx *store.Tx, c *call, parentID uuid.UUID, dest channelView) (*store.Message, error) {
	invisible := apierr.NotFound().WithField("reply_to_message_id")
	p, err := tx.MessageByID(ctx, c.p.BoxID, parentID)
	if err == store.ErrNotFound {
		return nil, invisible
	}
	if err != nil {
		return nil, err
	}
	if p.ChannelID == dest.channelID {
		if p.Seq <= dest.floor {
			return nil, invisible
		}
		return &p, nil
	}
	_, visible, err := messageView(ctx, tx, c, p)
	switch {
	case err != nil:
		return nil, err
	case !visible:
		return nil, invisible
	}
	return nil, apierr.Invalid("reply_to_message_id", "a reply must stay in the parent's room or DM pair").WithReason("reply_outside_channel")
}

// newMessageID is a time-ordered (version 7) UUID. The indexes that lead with a message's ID
// (messages_pkey, attention_one_per_message, the requests and attachments keys) then take
// each new message at their right edge; a random (version 4) ID lands on a random page of
// an index that grows with the box's history, so a send touches, and after a checkpoint
// logs in full, pages all over it.
func newMessageID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// newMessages is the shared part of a delivery.
func newMessages(c *call, cont sendContent, kind string, copies []store.MessageCopy) (store.NewMessages, error) {
	n := store.NewMessages{BoxID: c.p.BoxID, SenderID: c.p.AgentID, DestKind: kind, Copies: copies, Body: cont.body,
		Payload: cont.payload, Files: cont.filesJSON, ContentHash: cont.hash, DryRun: c.dryRun}
	if f := cont.upload; f != nil {
		r, err := f.Reader()
		if err != nil {
			return n, err
		}
		n.Attachment = &store.NewAttachment{Name: f.Name, MediaType: f.MediaType, SizeBytes: f.SizeBytes, SHA256: f.SHA256, Content: r}
	}
	return n, nil
}

// withAttachment adds an uploaded attachment's metadata to a mutation's idempotency
// arguments: a retry with the same key and the same file replays, another file conflicts.
// Without an attachment the arguments are unchanged.
func withAttachment[T any](args T, att *upload.File) any {
	if att == nil {
		return args
	}
	return struct {
		Input      T               `json:"input"`
		Attachment *attachmentMeta `json:"attachment"`
	}{args, attachmentIdentity(att)}
}

// MessageSendBatch sends the same content as independent DMs. Invalid content rejects the
// whole request; then each distinct recipient gets its own outcome (sent, duplicate, or
// rejected with an error object) without blocking the others.
func (s *Service) MessageSendBatch(ctx context.Context, req api.MessageSendBatchRequestObject) (api.MessageSendBatchResponseObject, error) {
	if req.JSONBody == nil { // multipart bodies are staged by the transport and arrive as JSON
		return nil, apierr.Invalid("", "the request body must be JSON or a staged multipart upload")
	}
	in := *req.JSONBody
	att := upload.FileFrom(ctx)
	dryRun := deref(in.DryRun)
	args := in
	args.IdempotencyKey, args.DryRun = "", nil
	// A recipient named twice is one recipient (SPEC §6): the batch is the same either way.
	args.Files, args.RecipientAgentIds = emptyAsAbsent(args.Files), firstOccurrences(args.RecipientAgentIds)
	m := mutation{op: "message_send_batch", idempotencyKey: in.IdempotencyKey, args: withAttachment(args, att), dryRun: dryRun}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.MessageSendBatchResult, error) {
		res, err := s.sendBatch(ctx, tx, c, in, att)
		if err != nil || !dryRun {
			return res, err
		}
		for i := range res.Results {
			res.Results[i].MessageId, res.Results[i].MessageSeq = nil, nil
		}
		res.DryRun = &dryRun
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) sendBatch(ctx context.Context, tx *store.Tx, c *call, in api.MessageSendBatchInput, att *upload.File) (api.MessageSendBatchResult, error) {
	cont, err := validateContent(in.BodyMd, in.Payload, in.Files, att, c.settings)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	// Repeated IDs collapse onto their first occurrence (whose index names errors).
	var ids []uuid.UUID
	firstIndex := map[uuid.UUID]int{}
	for i, id := range in.RecipientAgentIds {
		if _, seen := firstIndex[id]; !seen {
			firstIndex[id] = i
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return api.MessageSendBatchResult{}, apierr.Invalid("recipient_agent_ids", "name at least one recipient")
	}
	if int64(len(ids)) > c.settings.TargetsMax {
		return api.MessageSendBatchResult{}, apierr.TooLarge("recipient_agent_ids", "too_many_targets", c.settings.TargetsMax)
	}
	if err := checkEnvelope(cont, sendTargets{mentions: []uuid.UUID{}, requests: []uuid.UUID{}}, ids, c.settings); err != nil {
		return api.MessageSendBatchResult{}, err
	}
	enabled, err := tx.EnabledAgentIDs(ctx, c.p.BoxID, ids)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	results := make([]api.BatchOutcome, len(ids))
	var valid []uuid.UUID
	for i, id := range ids {
		results[i] = api.BatchOutcome{TargetAgentId: id}
		field := fieldIndex("recipient_agent_ids", firstIndex[id])
		switch {
		case id == c.p.AgentID:
			results[i].Status, results[i].Error = api.BatchSendStatusRejected,
				errorDetail(apierr.Invalid(field, "an agent cannot send a DM to itself").WithReason("self_target"))
		case !enabled[id]: // unknown, disabled, or of another box: indistinguishable
			results[i].Status, results[i].Error = api.BatchSendStatusRejected, errorDetail(apierr.NotFound().WithField(field))
		default:
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return api.MessageSendBatchResult{Results: results}, nil
	}
	chs, err := tx.LockDMChannels(ctx, c.p.BoxID, c.p.AgentID, valid, c.now)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	channelIDs := make([]uuid.UUID, 0, len(valid))
	for _, id := range valid {
		channelIDs = append(channelIDs, chs[id].ID)
	}
	latest, err := tx.SenderLatest(ctx, c.p.BoxID, c.p.AgentID, channelIDs)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	var copies []store.MessageCopy
	for i, id := range ids {
		if results[i].Status == api.BatchSendStatusRejected {
			continue
		}
		ch := chs[id].ID
		if l, ok := latest[ch]; ok && bytes.Equal(l.ContentHash, cont.hash) {
			seq := dec(l.Seq)
			results[i].Status, results[i].MessageId, results[i].MessageSeq = api.BatchSendStatusDuplicate, &l.MessageID, &seq
			continue
		}
		copies = append(copies, store.MessageCopy{ID: newMessageID(), ChannelID: ch, DestAgentID: id})
	}
	if len(copies) == 0 {
		return api.MessageSendBatchResult{Results: results}, nil
	}
	n, err := newMessages(c, cont, "dm", copies)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	res, err := tx.DeliverMessages(ctx, n, c.settings.ChannelMessageCap, c.settings.ChannelAttachmentCap, c.now)
	if err != nil {
		return api.MessageSendBatchResult{}, err
	}
	byChannel := make(map[uuid.UUID]store.Sent, len(res.Sent))
	for _, sent := range res.Sent {
		byChannel[sent.ChannelID] = sent
	}
	for i, id := range ids {
		if results[i].Status != "" {
			continue
		}
		sent := byChannel[chs[id].ID]
		seq := dec(sent.Seq)
		results[i].Status, results[i].MessageId, results[i].MessageSeq = api.BatchSendStatusSent, &sent.MessageID, &seq
	}
	return api.MessageSendBatchResult{Results: results}, nil
}

// errorDetail is the wire form of an error inside a per-item outcome.
func errorDetail(e *apierr.Error) *api.ErrorDetail {
	raw, _ := json.Marshal(e)
	var d api.ErrorDetail
	json.Unmarshal(raw, &d) //nolint:errcheck // same schema both ways
	return &d
}
