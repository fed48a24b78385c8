package service

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// Messages shared by the send and read paths: the destination union, the reader's view of a
// channel, message authorization, and the canonical Message DTO (SPEC §6).

// destination is a checked Destination: exactly one of a DM recipient or a room.
type destination struct {
	kind string // dm | room
	id   uuid.UUID
}

// parseDestination enforces the union: {kind: dm, recipient_agent_id} or {kind: room, room_id}.
func parseDestination(d api.Destination, field string) (destination, error) {
	bad := apierr.Invalid(field, "must be exactly {kind: dm, recipient_agent_id} or {kind: room, room_id}").WithReason("invalid_destination")
	switch {
	case d.Kind == api.DestinationKindDm && d.RecipientAgentId != nil && d.RoomId == nil:
		return destination{kind: "dm", id: *d.RecipientAgentId}, nil
	case d.Kind == api.DestinationKindRoom && d.RoomId != nil && d.RecipientAgentId == nil:
		return destination{kind: "room", id: *d.RoomId}, nil
	}
	return destination{}, bad
}

// channelView is what a reader may see of one channel now: messages above floor. epoch is the
// membership epoch cursors are bound to (0 for DMs).
type channelView struct {
	channelID uuid.UUID
	floor     int64
	epoch     int64
}

// roomView is the view of an active member (SPEC §5: joined visibility reads from the start
// of the current epoch).
func roomView(r store.Room) channelView {
	return channelView{channelID: r.ID, floor: readFloor(r), epoch: r.Member.Epoch}
}

// readableMessage loads a message the caller may read now — a DM participant, or an active
// member of its room when the message is above the read floor — with the caller's view of its
// channel. Anything else (missing, purged, other box, not a participant, left, invited only,
// below the floor) is the same NOT_FOUND_OR_FORBIDDEN without a reason.
func readableMessage(ctx context.Context, tx *store.Tx, c *call, id uuid.UUID) (store.Message, channelView, error) {
	m, err := tx.MessageByID(ctx, c.p.BoxID, id)
	if err == store.ErrNotFound {
		return m, channelView{}, apierr.NotFound()
	}
	if err != nil {
		return m, channelView{}, err
	}
	v, ok, err := messageView(ctx, tx, c, m)
	if err != nil {
		return m, v, err
	}
	if !ok {
		return m, v, apierr.NotFound()
	}
	return m, v, nil
}

// messageView decides whether the caller may read m now and returns its view of m's channel.
func messageView(ctx context.Context, tx *store.Tx, c *call, m store.Message) (channelView, bool, error) {
	if m.DestKind == "dm" {
		ok := m.SenderID == c.p.AgentID || (m.DestAgentID != nil && *m.DestAgentID == c.p.AgentID)
		return channelView{channelID: m.ChannelID}, ok, nil
	}
	r, err := memberRoom(ctx, tx, c, m.ChannelID)
	if e, ok := apierr.As(err); ok && e.Code == apierr.NotFoundOrForbidden {
		return channelView{}, false, nil
	}
	if err != nil {
		return channelView{}, false, err
	}
	v := roomView(r)
	return v, m.Seq > v.floor, nil
}

// messageDTOs turns messages of one channel into canonical DTOs. A reply whose parent the
// reader cannot see now (below its floor, or purged) shows reply_to_message_id null and
// reply_to_redacted true; a thread root it cannot see, thread_root_id null.
func messageDTOs(ctx context.Context, tx *store.Tx, c *call, v channelView, ms []store.Message) ([]api.Message, error) {
	var refs []uuid.UUID // the reply parents and thread roots the DTOs refer to
	for _, m := range ms {
		if m.ReplyTo != nil { // a message that is no reply is its own root
			refs = append(refs, *m.ReplyTo)
			if m.ThreadRoot != *m.ReplyTo {
				refs = append(refs, m.ThreadRoot)
			}
		}
	}
	visible, err := tx.VisibleChannelMessages(ctx, c.p.BoxID, v.channelID, v.floor, refs)
	if err != nil {
		return nil, err
	}
	out := make([]api.Message, 0, len(ms))
	for _, m := range ms {
		dto, err := messageDTO(m, visible)
		if err != nil {
			return nil, err
		}
		out = append(out, dto)
	}
	return out, nil
}

// messageDTO is the canonical Message; visible says which of the messages it refers to (its
// reply parent, its thread root) the reader may see: the others are redacted (SPEC §6).
func messageDTO(m store.Message, visible map[uuid.UUID]bool) (api.Message, error) {
	files := []api.FileRef{}
	if len(m.Files) > 0 {
		if err := json.Unmarshal(m.Files, &files); err != nil {
			return api.Message{}, err
		}
	}
	out := api.Message{
		MessageId:       m.ID,
		MessageSeq:      dec(m.Seq),
		Sender:          api.AgentName{AgentId: m.SenderID, Name: m.SenderName},
		BodyMd:          m.Body,
		MentionAgentIds: nonNilIDs(m.Mentions),
		RequestAgentIds: nonNilIDs(m.Requests),
		Files:           files,
		CreatedAt:       m.CreatedAt.UTC(),
	}
	if m.DestKind == "dm" {
		out.Destination = api.Destination{Kind: api.DestinationKindDm, RecipientAgentId: m.DestAgentID}
	} else {
		out.Destination = api.Destination{Kind: api.DestinationKindRoom, RoomId: m.DestRoomID}
	}
	if m.Payload != nil {
		p := m.Payload
		out.Payload = &p
	}
	if root := m.ThreadRoot; root == m.ID || visible[root] {
		out.ThreadRootId = &root
	}
	if m.ReplyTo != nil {
		if visible[*m.ReplyTo] {
			out.ReplyToMessageId = m.ReplyTo
		} else {
			redacted := true
			out.ReplyToRedacted = &redacted
		}
	}
	if a := m.Attachment; a != nil {
		out.Attachment = &api.Attachment{AttachmentId: a.ID, Name: a.Name, MediaType: a.MediaType, SizeBytes: a.SizeBytes, Sha256: a.SHA256}
	}
	return out, nil
}

func nonNilIDs(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}
