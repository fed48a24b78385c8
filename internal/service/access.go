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
	return checkVisible(tx.RoomForAgent(ctx, c.p.BoxID, roomID, c.p.AgentID))
}

// checkVisible is visibleRoom's rule on a room already loaded (err from loading it).
func checkVisible(r store.Room, err error) (store.Room, error) {
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
	return r, requireMember(r)
}

// writableRoom is memberRoom for writes: archived rooms are read-only.
func writableRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID) (store.Room, error) {
	r, err := visibleRoom(ctx, tx, c, roomID)
	if err != nil {
		return r, err
	}
	return r, requireWritable(r)
}

// readFloor is the message_seq at and below which the member may not read: 0 for shared
// history, the start of the current membership epoch for joined visibility.
func readFloor(r store.Room) int64 {
	if r.HistoryVisibility == "joined" {
		return r.Member.EpochStartSeq
	}
	return 0
}

// lockedRoom locks the room's channel row until commit and then loads the room as
// visibleRoom does. Membership changes (invite, join, leave) take it first, as sends and
// archival take the same channel lock, so the checks that follow see a state nothing can
// change before commit. head is the channel's committed last_message_seq.
func lockedRoom(ctx context.Context, tx *store.Tx, c *call, roomID uuid.UUID) (store.Room, int64, error) {
	head, err := tx.LockChannel(ctx, c.p.BoxID, roomID)
	if err == store.ErrNotFound {
		return store.Room{}, 0, apierr.NotFound()
	}
	if err != nil {
		return store.Room{}, 0, err
	}
	r, err := visibleRoom(ctx, tx, c, roomID)
	return r, head, err
}

// requireMember is memberRoom's rule for a room already loaded (e.g. by lockedRoom).
func requireMember(r store.Room) error {
	if r.Member.State != "active" {
		return apierr.Forbidden("not_a_member")
	}
	return nil
}

// requireWritable is writableRoom's rule for a room already loaded.
func requireWritable(r store.Room) error {
	if err := requireMember(r); err != nil {
		return err
	}
	if r.Status == "archived" {
		return errRoomArchived()
	}
	return nil
}

// errRoomArchived is the answer to any write into an archived (read-only) room.
func errRoomArchived() *apierr.Error {
	return apierr.New(apierr.RoomArchived, "the room is archived and read-only")
}
