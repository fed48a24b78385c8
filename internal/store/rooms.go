package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Room is a room with one agent's membership in it.
type Room struct {
	ID                uuid.UUID
	Name              string
	OwnerAgentID      uuid.UUID
	Status            string // active | archived
	HistoryVisibility string // shared | joined
	DefaultFollow     string
	BriefRevision     int64
	CreatedAt         time.Time
	Member            Membership
}

// Membership is an agent's membership row; State is "" when the agent was never invited.
type Membership struct {
	State          string // "" | invited | active | left
	Epoch          int64
	EpochStartSeq  int64
	Follow         string
	FollowRevision int64
	InviterAgentID *uuid.UUID
	InvitedAt      *time.Time
	JoinedAt       *time.Time
}

// RoomForAgent loads a room with agentID's membership; ErrNotFound when the room does not exist in the box.
func (t *Tx) RoomForAgent(ctx context.Context, boxID, roomID, agentID uuid.UUID) (Room, error) {
	r, err := one(t.q.GetRoomForAgent(ctx, db.GetRoomForAgentParams{BoxID: boxID, RoomID: roomID, AgentID: agentID}))
	if err != nil {
		return Room{}, err
	}
	room := Room{ID: r.RoomID, Name: r.Name, OwnerAgentID: r.OwnerAgentID, Status: r.Status,
		HistoryVisibility: r.HistoryVisibility, DefaultFollow: r.DefaultFollow, BriefRevision: r.BriefRevision, CreatedAt: r.CreatedAt}
	if r.State != nil {
		room.Member = Membership{State: *r.State, Epoch: *r.Epoch, EpochStartSeq: *r.EpochStartSeq, Follow: *r.Follow,
			FollowRevision: *r.FollowRevision, InviterAgentID: r.InviterAgentID, InvitedAt: r.InvitedAt, JoinedAt: r.JoinedAt}
	}
	return room, nil
}

// LockChannel locks a channel row until commit and returns its committed high sequence.
func (t *Tx) LockChannel(ctx context.Context, boxID, channelID uuid.UUID) (int64, error) {
	return one(t.q.LockChannel(ctx, db.LockChannelParams{BoxID: boxID, ChannelID: channelID}))
}

// ChannelHead is the committed upper bound of a channel's message stream.
func (t *Tx) ChannelHead(ctx context.Context, boxID, channelID uuid.UUID) (int64, error) {
	return one(t.q.ChannelHead(ctx, db.ChannelHeadParams{BoxID: boxID, ChannelID: channelID}))
}
