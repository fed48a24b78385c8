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
	return roomFrom(r), nil
}

func roomFrom(r db.GetRoomForAgentRow) Room {
	room := Room{ID: r.RoomID, Name: r.Name, OwnerAgentID: r.OwnerAgentID, Status: r.Status,
		HistoryVisibility: r.HistoryVisibility, DefaultFollow: r.DefaultFollow, BriefRevision: r.BriefRevision, CreatedAt: r.CreatedAt}
	if r.State != nil {
		room.Member = Membership{State: *r.State, Epoch: *r.Epoch, EpochStartSeq: *r.EpochStartSeq, Follow: *r.Follow,
			FollowRevision: *r.FollowRevision, InviterAgentID: r.InviterAgentID, InvitedAt: r.InvitedAt, JoinedAt: r.JoinedAt}
	}
	return room
}

// RoomSend is what a room post checks once the room's channel is locked.
type RoomSend struct {
	Room   Room                 // with the sender's membership
	Latest *LatestSent          // the sender's duplicate reference in the room; nil when none
	States map[uuid.UUID]string // membership state of each asked agent that has a membership row
}

// LockRoomForSend locks the room's channel until commit and then reads the room with the
// sender's membership, the sender's duplicate reference in it and the membership states of
// agents — separate statements in the same round trip, so each sees everything committed
// before the lock was granted (pipeline.go). ErrNotFound when the room does not exist.
func (t *Tx) LockRoomForSend(ctx context.Context, boxID, roomID, senderID uuid.UUID, agents []uuid.UUID) (RoomSend, error) {
	return t.QueueRoomForSend(ctx, boxID, roomID, senderID, agents).Result(ctx, t)
}

// RoomSendLock is LockRoomForSend queued to ride in the transaction's next round trip.
type RoomSendLock struct {
	q                *queued
	out              RoomSend
	lockErr, roomErr error
}

// QueueRoomForSend queues LockRoomForSend's statements behind the transaction's next round
// trip; Result returns what LockRoomForSend would (sending them now if no round trip did).
func (t *Tx) QueueRoomForSend(ctx context.Context, boxID, roomID, senderID uuid.UUID, agents []uuid.UUID) *RoomSendLock {
	l := &RoomSendLock{}
	out := &l.out
	steps := []step{
		func(q *db.Queries) error {
			_, l.lockErr = one(q.LockChannel(ctx, db.LockChannelParams{BoxID: boxID, ChannelID: roomID}))
			return notFoundIsNil(l.lockErr)
		},
		func(q *db.Queries) error {
			var r db.GetRoomForAgentRow
			r, l.roomErr = one(q.GetRoomForAgent(ctx, db.GetRoomForAgentParams{BoxID: boxID, RoomID: roomID, AgentID: senderID}))
			out.Room = roomFrom(r)
			return notFoundIsNil(l.roomErr)
		},
		func(q *db.Queries) error {
			rows, err := q.SenderLatest(ctx, db.SenderLatestParams{BoxID: boxID, SenderAgentID: senderID, ChannelIds: []uuid.UUID{roomID}})
			out.Latest = nil
			for _, r := range rows {
				out.Latest = &LatestSent{MessageID: r.MessageID, Seq: r.MessageSeq, CreatedAt: r.CreatedAt, ContentHash: r.ContentHash}
			}
			return err
		},
	}
	if len(agents) > 0 {
		steps = append(steps, func(q *db.Queries) error {
			rows, err := q.RoomMemberStates(ctx, db.RoomMemberStatesParams{BoxID: boxID, RoomID: roomID, AgentIds: agents})
			out.States = make(map[uuid.UUID]string, len(rows))
			for _, r := range rows {
				out.States[r.AgentID] = r.State
			}
			return err
		})
	}
	l.q = t.queue(steps...)
	return l
}

// Result is the locked room's RoomSend, or ErrNotFound when the room does not exist.
func (l *RoomSendLock) Result(ctx context.Context, t *Tx) (RoomSend, error) {
	if err := l.q.run(ctx, t); err != nil {
		return RoomSend{}, err
	}
	if l.lockErr != nil || l.roomErr != nil {
		return RoomSend{}, ErrNotFound
	}
	return l.out, nil
}

// LockChannel locks a channel row until commit and returns its committed high sequence.
func (t *Tx) LockChannel(ctx context.Context, boxID, channelID uuid.UUID) (int64, error) {
	return one(t.q.LockChannel(ctx, db.LockChannelParams{BoxID: boxID, ChannelID: channelID}))
}

// ChannelHead is the committed upper bound of a channel's message stream.
func (t *Tx) ChannelHead(ctx context.Context, boxID, channelID uuid.UUID) (int64, error) {
	return one(t.q.ChannelHead(ctx, db.ChannelHeadParams{BoxID: boxID, ChannelID: channelID}))
}

// NewRoom is the input of CreateRoom.
type NewRoom struct {
	BoxID             uuid.UUID
	ID                uuid.UUID
	Name              string
	OwnerAgentID      uuid.UUID
	HistoryVisibility string
	DefaultFollow     string
	Invitees          []uuid.UUID // validated by the caller
}

// CreateRoom writes a room: its channel (channel_id = room_id), the room, the owner as an
// active member in epoch 1, and pending invitations. It posts no message.
func (t *Tx) CreateRoom(ctx context.Context, n NewRoom, now time.Time) error {
	if err := t.q.InsertRoomChannel(ctx, db.InsertRoomChannelParams{BoxID: n.BoxID, RoomID: n.ID, Now: now}); err != nil {
		return err
	}
	if err := t.q.InsertRoom(ctx, db.InsertRoomParams{BoxID: n.BoxID, RoomID: n.ID, Name: n.Name, OwnerAgentID: n.OwnerAgentID,
		HistoryVisibility: n.HistoryVisibility, DefaultFollow: n.DefaultFollow, Now: now}); err != nil {
		return err
	}
	if err := t.q.InsertRoomOwner(ctx, db.InsertRoomOwnerParams{BoxID: n.BoxID, RoomID: n.ID, AgentID: n.OwnerAgentID,
		Follow: n.DefaultFollow, Now: &now}); err != nil {
		return err
	}
	if len(n.Invitees) == 0 {
		return nil
	}
	_, err := t.InviteRoomMembers(ctx, n.BoxID, n.ID, n.OwnerAgentID, n.Invitees, now)
	return err
}

// EnabledAgentIDs returns which of ids are enabled agents of the box, in one query.
func (t *Tx) EnabledAgentIDs(ctx context.Context, boxID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	rows, err := t.q.EnabledAgentIDs(ctx, db.EnabledAgentIDsParams{BoxID: boxID, AgentIds: ids})
	out := make(map[uuid.UUID]bool, len(rows))
	for _, id := range rows {
		out[id] = true
	}
	return out, err
}

// AgentEnabled reports whether id is an enabled agent of the box.
func (t *Tx) AgentEnabled(ctx context.Context, boxID, id uuid.UUID) (bool, error) {
	return t.q.AgentEnabled(ctx, db.AgentEnabledParams{BoxID: boxID, AgentID: id})
}

// RoomMemberStates returns the membership state of each of ids that has a membership row, in one query.
func (t *Tx) RoomMemberStates(ctx context.Context, boxID, roomID uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := t.q.RoomMemberStates(ctx, db.RoomMemberStatesParams{BoxID: boxID, RoomID: roomID, AgentIds: ids})
	out := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		out[r.AgentID] = r.State
	}
	return out, err
}

// InviteRoomMembers records pending invitations for agents never invited or who left (active
// and pending members are left alone) and returns the agents invited.
func (t *Tx) InviteRoomMembers(ctx context.Context, boxID, roomID, inviter uuid.UUID, ids []uuid.UUID, now time.Time) ([]uuid.UUID, error) {
	return t.q.InviteRoomMembers(ctx, db.InviteRoomMembersParams{BoxID: boxID, RoomID: roomID, InviterAgentID: &inviter,
		Now: &now, AgentIds: ids})
}

// JoinRoom turns a pending invitation into an active membership with a new epoch that starts
// at epochStartSeq; ErrNotFound when the agent is not a pending invitee.
func (t *Tx) JoinRoom(ctx context.Context, boxID, roomID, agentID uuid.UUID, epochStartSeq int64, follow string, now time.Time) (int64, error) {
	return one(t.q.JoinRoom(ctx, db.JoinRoomParams{BoxID: boxID, RoomID: roomID, AgentID: agentID,
		EpochStartSeq: epochStartSeq, Follow: follow, Now: &now}))
}

// LeaveRoom ends an active membership and, at once, the agent's outstanding leases on the
// room's attention rows, those of a claim in flight included (LockRoomUnread); ErrNotFound
// when the agent is not an active member.
func (t *Tx) LeaveRoom(ctx context.Context, boxID, roomID, agentID uuid.UUID, now time.Time) (int64, error) {
	epoch, err := one(t.q.LeaveRoom(ctx, db.LeaveRoomParams{BoxID: boxID, RoomID: roomID, AgentID: agentID, Now: &now}))
	if err != nil {
		return 0, err
	}
	if err := t.q.LockRoomUnread(ctx, db.LockRoomUnreadParams{BoxID: boxID, AgentID: agentID, RoomID: roomID}); err != nil {
		return 0, err
	}
	return epoch, t.q.EndRoomLeases(ctx, db.EndRoomLeasesParams{BoxID: boxID, AgentID: agentID, RoomID: roomID})
}

// SetRoomFollow is a compare-and-set of an active member's follow preference; ok is false
// when the member is not active or expected is stale.
func (t *Tx) SetRoomFollow(ctx context.Context, boxID, roomID, agentID uuid.UUID, expected int64, follow string) (rev int64, ok bool, err error) {
	rev, err = one(t.q.SetRoomFollow(ctx, db.SetRoomFollowParams{BoxID: boxID, RoomID: roomID, AgentID: agentID,
		ExpectedRevision: expected, Follow: follow}))
	if err == ErrNotFound {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// Brief is a room's brief.
type Brief struct {
	Text      string
	Revision  int64 // 0 while empty
	UpdatedAt *time.Time
	Status    string // the room's status
}

// RoomBrief reads a room's brief.
func (t *Tx) RoomBrief(ctx context.Context, boxID, roomID uuid.UUID) (Brief, error) {
	r, err := one(t.q.GetRoomBrief(ctx, db.GetRoomBriefParams{BoxID: boxID, RoomID: roomID}))
	return Brief{Text: r.BriefMd, Revision: r.BriefRevision, UpdatedAt: r.BriefUpdatedAt, Status: r.Status}, err
}

// AppendRoomBrief appends text as a compare-and-set on the brief revision; ok is false when
// the revision is stale, the room is not active, or the brief would exceed maxBytes.
func (t *Tx) AppendRoomBrief(ctx context.Context, boxID, roomID uuid.UUID, expected int64, text string, maxBytes int64, now time.Time) (Brief, bool, error) {
	r, err := one(t.q.AppendRoomBrief(ctx, db.AppendRoomBriefParams{BoxID: boxID, RoomID: roomID, ExpectedRevision: expected,
		AppendMd: text, MaxBytes: maxBytes, Now: &now}))
	if err == ErrNotFound {
		return Brief{}, false, nil
	}
	return Brief{Text: r.BriefMd, Revision: r.BriefRevision, UpdatedAt: r.BriefUpdatedAt, Status: "active"}, err == nil, err
}

// RosterEntry is one active or invited member.
type RosterEntry struct {
	AgentID uuid.UUID
	Name    string
	State   string // active | invited
}

// RoomRoster returns up to limit active members (first) and pending invitees.
func (t *Tx) RoomRoster(ctx context.Context, boxID, roomID uuid.UUID, limit int32) ([]RosterEntry, error) {
	rows, err := t.q.RoomRoster(ctx, db.RoomRosterParams{BoxID: boxID, RoomID: roomID, MaxRows: limit})
	out := make([]RosterEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, RosterEntry{AgentID: r.AgentID, Name: r.Name, State: r.State})
	}
	return out, err
}

// AgentRoom is one of an agent's active memberships or pending invitations.
type AgentRoom struct {
	RoomID         uuid.UUID
	Name           string
	Status         string
	BriefRevision  int64
	State          string // active | invited
	Follow         string
	FollowRevision int64
	InviterAgentID *uuid.UUID
	InvitedAt      *time.Time
}

// AgentRooms lists up to limit of the agent's active memberships and pending invitations
// with room_id above after (uuid.Nil: from the start), by room_id.
func (t *Tx) AgentRooms(ctx context.Context, boxID, agentID, after uuid.UUID, limit int32) ([]AgentRoom, error) {
	rows, err := t.q.ListAgentRooms(ctx, db.ListAgentRoomsParams{BoxID: boxID, AgentID: agentID, AfterRoomID: after, MaxRows: limit})
	out := make([]AgentRoom, 0, len(rows))
	for _, r := range rows {
		out = append(out, AgentRoom{RoomID: r.RoomID, Name: r.Name, Status: r.Status, BriefRevision: r.BriefRevision,
			State: r.State, Follow: r.Follow, FollowRevision: r.FollowRevision, InviterAgentID: r.InviterAgentID, InvitedAt: r.InvitedAt})
	}
	return out, err
}

// BoxRoom is a room as an admin sees it (never message bodies).
type BoxRoom struct {
	ID                uuid.UUID
	Name              string
	OwnerAgentID      uuid.UUID
	Status            string
	HistoryVisibility string
	ActiveMembers     int64
	CreatedAt         time.Time
}

// BoxRooms lists every room of a box by (name, room_id).
func (t *Tx) BoxRooms(ctx context.Context, boxID uuid.UUID) ([]BoxRoom, error) {
	rows, err := t.q.ListBoxRooms(ctx, boxID)
	out := make([]BoxRoom, 0, len(rows))
	for _, r := range rows {
		out = append(out, BoxRoom{ID: r.RoomID, Name: r.Name, OwnerAgentID: r.OwnerAgentID, Status: r.Status,
			HistoryVisibility: r.HistoryVisibility, ActiveMembers: r.ActiveMembers, CreatedAt: r.CreatedAt})
	}
	return out, err
}

// BoxRoom loads one room for an admin; ErrNotFound when it is not in the box.
func (t *Tx) BoxRoom(ctx context.Context, boxID, roomID uuid.UUID) (BoxRoom, error) {
	r, err := one(t.q.GetBoxRoom(ctx, db.GetBoxRoomParams{BoxID: boxID, RoomID: roomID}))
	return BoxRoom{ID: r.RoomID, Name: r.Name, OwnerAgentID: r.OwnerAgentID, Status: r.Status,
		HistoryVisibility: r.HistoryVisibility, ActiveMembers: r.ActiveMembers, CreatedAt: r.CreatedAt}, err
}

// ArchiveRoom makes a room read-only (archiving an archived room changes nothing).
func (t *Tx) ArchiveRoom(ctx context.Context, boxID, roomID uuid.UUID) error {
	return t.q.ArchiveRoom(ctx, db.ArchiveRoomParams{BoxID: boxID, RoomID: roomID})
}

// SetRoomOwner reassigns a room's owner (the caller checks the new owner is an active member).
func (t *Tx) SetRoomOwner(ctx context.Context, boxID, roomID, ownerID uuid.UUID) error {
	return t.q.SetRoomOwner(ctx, db.SetRoomOwnerParams{BoxID: boxID, RoomID: roomID, OwnerAgentID: ownerID})
}
