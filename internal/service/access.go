package service

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// Room access rules (SPEC §5), in one place for every operation that touches a room.
// Knowing a room ID grants nothing: a room the caller was never invited to (or left) is
// indistinguishable from a missing one.

// visibleRoom returns a room the caller is an active member or pending invitee of.
func visibleRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID) (store.Room, error) {
	r, err := tx.RoomForAgent(ctx, c.p.BoxID, roomID, c.p.AgentID)
	if err == store.ErrNotFound || (err == nil && r.Member.State != "active" && r.Member.State != "invited") {
		return store.Room{}, apierr.NotFound()
	}
	return r, err
}

// memberRoom returns a room the caller is an active member of. A pending invitee sees the
// room exists but may not read history, roster or brief (reason not_a_member).
func memberRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID) (store.Room, error) {
	r, err := visibleRoom(ctx, tx, c, roomID)
	if err != nil {
		return r, err
	}
	if r.Member.State != "active" {
		return r, apierr.Forbidden("not_a_member")
	}
	return r, nil
}

// writableRoom is memberRoom for writes: archived rooms are read-only.
func writableRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID) (store.Room, error) {
	r, err := memberRoom(ctx, tx, c, roomID)
	if err == nil && r.Status == "archived" {
		return r, apierr.New(apierr.RoomArchived, "the room is archived and read-only")
	}
	return r, err
}

// readFloor is the message_seq at and below which the member may not read: 0 for shared
// history, the start of the current membership epoch for joined visibility.
func readFloor(r store.Room) int64 {
	if r.HistoryVisibility == "joined" {
		return r.Member.EpochStartSeq
	}
	return 0
}
