package service

import (
	"context"
	"math"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// Rooms (SPEC §5): membership invited → active (join, a new epoch) → left; the owner cannot
// leave; archived rooms are read-only. Access checks live in access.go. Membership changes
// lock the room's channel row first (lockedRoom) so they serialize with sends and archival.

// checkInvitees validates invitee IDs with one query whatever their number: at most
// targets_max, distinct, not the caller, each an enabled agent of the caller's box.
func checkInvitees(ctx context.Context, tx *store.Tx, c *call, ids []uuid.UUID) error {
	if int64(len(ids)) > c.settings.TargetsMax {
		return apierr.TooLarge("invitee_agent_ids", "too_many_targets", c.settings.TargetsMax)
	}
	if len(ids) == 0 {
		return nil
	}
	enabled, err := tx.EnabledAgentIDs(ctx, c.p.BoxID, ids)
	if err != nil {
		return err
	}
	seen := make(map[uuid.UUID]bool, len(ids))
	for i, id := range ids {
		field := fieldIndex("invitee_agent_ids", i)
		switch {
		case seen[id]:
			return apierr.Invalid(field, "each agent may be named once").WithReason("duplicate_target")
		case id == c.p.AgentID:
			return apierr.Invalid(field, "the caller cannot invite itself").WithReason("self_target")
		case !enabled[id]:
			return apierr.Invalid(field, "not an enabled agent of this box").WithReason("unknown_target")
		}
		seen[id] = true
	}
	return nil
}

// RoomCreate creates a room owned by the caller (active, epoch 1) with pending invitations.
// It sends no message. With dry_run it validates everything and writes nothing.
func (s *Service) RoomCreate(ctx context.Context, req api.RoomCreateRequestObject) (api.RoomCreateResponseObject, error) {
	in := req.Body
	if len(in.Name) > RoomNameMaxBytes {
		return nil, apierr.TooLong("name", int64(RoomNameMaxBytes))
	}
	if in.Name == "" {
		return nil, apierr.Invalid("name", "must not be empty")
	}
	visibility := defaultHistoryVisibility
	if in.HistoryVisibility != nil {
		visibility = api.HistoryVisibility(*in.HistoryVisibility)
	}
	follow := defaultRoomFollow
	if in.DefaultFollow != nil {
		follow = *in.DefaultFollow
	}
	invitees := []uuid.UUID{}
	if in.InviteeAgentIds != nil {
		invitees = append(invitees, *in.InviteeAgentIds...)
	}
	dryRun := deref(in.DryRun)
	m := mutation{op: "room_create", idempotencyKey: in.IdempotencyKey, dryRun: dryRun,
		args: map[string]any{"name": in.Name, "invitee_agent_ids": invitees, "history_visibility": visibility, "default_follow": follow}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomCreateResult, error) {
		if err := checkInvitees(ctx, tx, c, invitees); err != nil {
			return api.RoomCreateResult{}, err
		}
		res := api.RoomCreateResult{DryRun: dryRun, Name: in.Name, OwnerAgentId: c.p.AgentID, HistoryVisibility: visibility,
			DefaultFollow: follow, Status: api.RoomStatusActive, InvitedAgentIds: invitees}
		if dryRun {
			return res, nil
		}
		id := uuid.New()
		err := tx.CreateRoom(ctx, store.NewRoom{BoxID: c.p.BoxID, ID: id, Name: in.Name, OwnerAgentID: c.p.AgentID,
			HistoryVisibility: string(visibility), DefaultFollow: string(follow), Invitees: invitees}, c.now)
		res.RoomId, res.CreatedAt = &id, &c.now
		return res, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomInvite invites agents that are not active or pending members (left members may be
// invited again). Owner only; archived rooms refuse.
func (s *Service) RoomInvite(ctx context.Context, req api.RoomInviteRequestObject) (api.RoomInviteResponseObject, error) {
	in := req.Body
	if len(in.InviteeAgentIds) == 0 {
		return nil, apierr.Invalid("invitee_agent_ids", "name at least one agent to invite")
	}
	m := mutation{op: "room_invite", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"room_id": req.RoomId, "invitee_agent_ids": in.InviteeAgentIds}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomInviteResult, error) {
		r, _, err := lockedRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomInviteResult{}, err
		}
		if err := requireWritable(r); err != nil {
			return api.RoomInviteResult{}, err
		}
		if r.OwnerAgentID != c.p.AgentID {
			return api.RoomInviteResult{}, apierr.Forbidden("not_owner")
		}
		if err := checkInvitees(ctx, tx, c, in.InviteeAgentIds); err != nil {
			return api.RoomInviteResult{}, err
		}
		states, err := tx.RoomMemberStates(ctx, c.p.BoxID, r.ID, in.InviteeAgentIds)
		if err != nil {
			return api.RoomInviteResult{}, err
		}
		for i, id := range in.InviteeAgentIds {
			switch states[id] {
			case "active":
				return api.RoomInviteResult{}, apierr.Invalid(fieldIndex("invitee_agent_ids", i), "already an active member").WithReason("already_member")
			case "invited":
				return api.RoomInviteResult{}, apierr.Invalid(fieldIndex("invitee_agent_ids", i), "already invited").WithReason("already_invited")
			}
		}
		if _, err := tx.InviteRoomMembers(ctx, c.p.BoxID, r.ID, c.p.AgentID, in.InviteeAgentIds, c.now); err != nil {
			return api.RoomInviteResult{}, err
		}
		return api.RoomInviteResult{RoomId: r.ID, InvitedAgentIds: in.InviteeAgentIds}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomJoin accepts a pending invitation: the caller becomes active at once in a new epoch
// that starts at the channel's committed head (the floor of `joined` history visibility),
// with the room's default follow preference.
func (s *Service) RoomJoin(ctx context.Context, req api.RoomJoinRequestObject) (api.RoomJoinResponseObject, error) {
	m := mutation{op: "room_join", idempotencyKey: req.Body.IdempotencyKey, args: map[string]any{"room_id": req.RoomId}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomMembershipResult, error) {
		r, head, err := lockedRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomMembershipResult{}, err
		}
		if r.Status == "archived" {
			return api.RoomMembershipResult{}, errRoomArchived()
		}
		if r.Member.State == "active" {
			return api.RoomMembershipResult{}, apierr.Invalid("room_id", "already an active member").WithReason("already_member")
		}
		epoch, err := tx.JoinRoom(ctx, c.p.BoxID, r.ID, c.p.AgentID, head, r.DefaultFollow, c.now)
		return api.RoomMembershipResult{RoomId: r.ID, State: api.MembershipResultStateActive, Epoch: dec(epoch), At: c.now}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomLeave ends an active, non-owner membership: reads and the caller's outstanding leases
// in the room end at once; coming back needs a new invitation.
func (s *Service) RoomLeave(ctx context.Context, req api.RoomLeaveRequestObject) (api.RoomLeaveResponseObject, error) {
	m := mutation{op: "room_leave", idempotencyKey: req.Body.IdempotencyKey, args: map[string]any{"room_id": req.RoomId}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomMembershipResult, error) {
		r, _, err := lockedRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomMembershipResult{}, err
		}
		if err := requireMember(r); err != nil {
			return api.RoomMembershipResult{}, err
		}
		if r.OwnerAgentID == c.p.AgentID {
			return api.RoomMembershipResult{}, apierr.Forbidden("owner_cannot_leave").
				WithSuggestion("ask an admin to reassign ownership or archive the room")
		}
		epoch, err := tx.LeaveRoom(ctx, c.p.BoxID, r.ID, c.p.AgentID, c.now)
		return api.RoomMembershipResult{RoomId: r.ID, State: api.MembershipResultStateLeft, Epoch: dec(epoch), At: c.now}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomFollow sets the caller's follow preference for its current epoch (compare-and-set).
// It is prospective only: it changes the membership row and nothing else.
func (s *Service) RoomFollow(ctx context.Context, req api.RoomFollowRequestObject) (api.RoomFollowResponseObject, error) {
	in := req.Body
	expected, err := parseDec("expected_revision", in.ExpectedRevision)
	if err != nil {
		return nil, err
	}
	m := mutation{op: "room_follow", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"room_id": req.RoomId, "follow": in.Follow, "expected_revision": dec(expected)}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomFollowResult, error) {
		if _, err := memberRoom(ctx, tx, c, req.RoomId); err != nil {
			return api.RoomFollowResult{}, err
		}
		rev, ok, err := tx.SetRoomFollow(ctx, c.p.BoxID, req.RoomId, c.p.AgentID, expected, string(in.Follow))
		if err != nil {
			return api.RoomFollowResult{}, err
		}
		if !ok { // a concurrent change won: report the membership as it is now
			r, err := memberRoom(ctx, tx, c, req.RoomId)
			if err != nil {
				return api.RoomFollowResult{}, err
			}
			return api.RoomFollowResult{}, apierr.Conflict(r.Member.FollowRevision).WithField("expected_revision")
		}
		return api.RoomFollowResult{RoomId: req.RoomId, Follow: in.Follow, Revision: dec(rev)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomGet returns details and a bounded roster to an active member, and only the invitation
// metadata to a pending invitee.
func (s *Service) RoomGet(ctx context.Context, req api.RoomGetRequestObject) (api.RoomGetResponseObject, error) {
	out, err := runRead(ctx, s, "room_get", func(ctx context.Context, tx *store.Tx, c *call) (api.RoomDetails, error) {
		r, err := visibleRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomDetails{}, err
		}
		if r.Member.State == "invited" {
			return api.RoomDetails{RoomId: r.ID, Name: r.Name, State: api.MemberStateInvited,
				InviterAgentId: r.Member.InviterAgentID, InvitedAt: r.Member.InvitedAt}, nil
		}
		members, err := tx.RoomRoster(ctx, c.p.BoxID, r.ID, int32(RosterMax+1))
		if err != nil {
			return api.RoomDetails{}, err
		}
		truncated := len(members) > RosterMax
		roster := make([]api.RosterEntry, 0, min(len(members), RosterMax))
		for _, m := range members[:min(len(members), RosterMax)] {
			roster = append(roster, api.RosterEntry{AgentId: m.AgentID, Name: m.Name, State: api.MemberState(m.State)})
		}
		status := api.RoomStatus(r.Status)
		visibility := api.HistoryVisibility(r.HistoryVisibility)
		defaultFollow, follow := api.Follow(r.DefaultFollow), api.Follow(r.Member.Follow)
		followRev, briefRev, epoch := dec(r.Member.FollowRevision), dec(r.BriefRevision), dec(r.Member.Epoch)
		return api.RoomDetails{RoomId: r.ID, Name: r.Name, State: api.MemberStateActive, Status: &status,
			OwnerAgentId: &r.OwnerAgentID, HistoryVisibility: &visibility, DefaultFollow: &defaultFollow,
			Follow: &follow, FollowRevision: &followRev, BriefRevision: &briefRev, Epoch: &epoch,
			JoinedAt: r.Member.JoinedAt, CreatedAt: &r.CreatedAt, Roster: &roster, RosterTruncated: &truncated}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomBriefGet returns the brief to an active member, whatever the history visibility
// (a newly joined member reads it for onboarding).
func (s *Service) RoomBriefGet(ctx context.Context, req api.RoomBriefGetRequestObject) (api.RoomBriefGetResponseObject, error) {
	out, err := runRead(ctx, s, "room_brief_get", func(ctx context.Context, tx *store.Tx, c *call) (api.RoomBrief, error) {
		r, err := memberRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomBrief{}, err
		}
		b, err := tx.RoomBrief(ctx, c.p.BoxID, r.ID)
		return api.RoomBrief{RoomId: r.ID, BriefMd: b.Text, Revision: dec(b.Revision), UpdatedAt: b.UpdatedAt}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoomBriefUpdate appends to the brief (compare-and-set on its revision) in an active room.
// It posts no message.
func (s *Service) RoomBriefUpdate(ctx context.Context, req api.RoomBriefUpdateRequestObject) (api.RoomBriefUpdateResponseObject, error) {
	in := req.Body
	switch {
	case in.AppendMd == "":
		return nil, apierr.Invalid("append_md", "must not be empty")
	case len(in.AppendMd) > BriefAppendMaxBytes:
		return nil, apierr.TooLong("append_md", int64(BriefAppendMaxBytes))
	}
	expected, err := parseDec("expected_revision", in.ExpectedRevision)
	if err != nil {
		return nil, err
	}
	m := mutation{op: "room_brief_update", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"room_id": req.RoomId, "append_md": in.AppendMd, "expected_revision": dec(expected)}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.RoomBrief, error) {
		r, err := writableRoom(ctx, tx, c, req.RoomId)
		if err != nil {
			return api.RoomBrief{}, err
		}
		b, ok, err := tx.AppendRoomBrief(ctx, c.p.BoxID, r.ID, expected, in.AppendMd, int64(BriefMaxBytes), c.now)
		if err != nil {
			return api.RoomBrief{}, err
		}
		if !ok { // the update re-checks status, revision and size together; say which failed
			cur, err := tx.RoomBrief(ctx, c.p.BoxID, r.ID)
			switch {
			case err != nil:
				return api.RoomBrief{}, err
			case cur.Status == "archived":
				return api.RoomBrief{}, errRoomArchived()
			case cur.Revision != expected:
				return api.RoomBrief{}, apierr.Conflict(cur.Revision).WithField("expected_revision")
			default:
				return api.RoomBrief{}, apierr.TooLarge("append_md", "brief_too_large", int64(BriefMaxBytes))
			}
		}
		return api.RoomBrief{RoomId: r.ID, BriefMd: b.Text, Revision: dec(b.Revision), UpdatedAt: b.UpdatedAt}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// roomListPos is the room_list cursor position: the last room_id returned.
type roomListPos struct {
	RoomID uuid.UUID `json:"r"`
}

// RoomList pages through the caller's active memberships and pending invitations by room_id.
func (s *Service) RoomList(ctx context.Context, req api.RoomListRequestObject) (api.RoomListResponseObject, error) {
	out, err := runRead(ctx, s, "room_list", func(ctx context.Context, tx *store.Tx, c *call) (api.RoomPage, error) {
		var after roomListPos
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "room_list", "", 0, *req.Params.Cursor, &after); err != nil {
				return api.RoomPage{}, err
			}
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		rooms, err := tx.AgentRooms(ctx, c.p.BoxID, c.p.AgentID, after.RoomID, pageProbe(limit))
		if err != nil {
			return api.RoomPage{}, err
		}
		items, next, err := keysetPage(ctx, s, c, rooms, limit, roomListItem, listScope{stream: "room_list"},
			func(r store.AgentRoom) any { return roomListPos{RoomID: r.RoomID} })
		return api.RoomPage{Items: items, NextCursor: next}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// roomListItem shows an active membership with its follow preference and brief revision, and
// a pending invitation with only its metadata (invitees may not read the brief).
func roomListItem(r store.AgentRoom) api.RoomListItem {
	item := api.RoomListItem{RoomId: r.RoomID, Name: r.Name, State: api.MemberState(r.State), Status: api.RoomStatus(r.Status)}
	if r.State == "invited" {
		item.InviterAgentId, item.InvitedAt = r.InviterAgentID, r.InvitedAt
		return item
	}
	follow, followRev, briefRev := api.Follow(r.Follow), dec(r.FollowRevision), dec(r.BriefRevision)
	item.Follow, item.FollowRevision, item.BriefRevision = &follow, &followRev, &briefRev
	return item
}

// firstRooms is the start of the caller's room list in agent_prime's shape.
func firstRooms(ctx context.Context, tx *store.Tx, c *call, limit int64) ([]api.PrimeRoom, error) {
	rooms, err := tx.AgentRooms(ctx, c.p.BoxID, c.p.AgentID, uuid.Nil, int32(min(limit, math.MaxInt32)))
	out := make([]api.PrimeRoom, 0, len(rooms))
	for _, r := range rooms {
		item := roomListItem(r)
		status := api.RoomStatus(item.Status)
		out = append(out, api.PrimeRoom{RoomId: item.RoomId, Name: item.Name, State: api.MemberState(item.State),
			Status: &status, Follow: (*api.Follow)(item.Follow), BriefRevision: item.BriefRevision})
	}
	return out, err
}
