package service

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// Admin room operations: list, archive (read-only from then on), reassign the owner. Admins
// never read message bodies and never act as a member.

func adminRoom(r store.BoxRoom) api.AdminRoom {
	return api.AdminRoom{RoomId: r.ID, Name: r.Name, OwnerAgentId: r.OwnerAgentID, Status: api.RoomStatus(r.Status),
		HistoryVisibility: api.HistoryVisibility(r.HistoryVisibility), ActiveMembers: r.ActiveMembers, CreatedAt: r.CreatedAt}
}

// lockedBoxRoom locks a room's channel row (as lockedRoom does for agents) and loads the room.
func lockedBoxRoom(ctx context.Context, tx *store.Tx, boxID, roomID uuid.UUID) (store.BoxRoom, error) {
	_, err := tx.LockChannel(ctx, boxID, roomID)
	if err == nil {
		var r store.BoxRoom
		if r, err = tx.BoxRoom(ctx, boxID, roomID); err == nil {
			return r, nil
		}
	}
	if err == store.ErrNotFound {
		return store.BoxRoom{}, apierr.NotFound().WithField("room_id")
	}
	return store.BoxRoom{}, err
}

func (s *Service) AdminRoomList(ctx context.Context, req api.AdminRoomListRequestObject) (api.AdminRoomListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_room_list", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminRoomList, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminRoomList{}, err
		}
		rooms, err := tx.BoxRooms(ctx, b.ID)
		items := make([]api.AdminRoom, 0, len(rooms))
		for _, r := range rooms {
			items = append(items, adminRoom(r))
		}
		return api.AdminRoomList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminRoomList200JSONResponse(out), nil
}

// AdminRoomArchive makes a room read-only; archiving an archived room changes nothing.
func (s *Service) AdminRoomArchive(ctx context.Context, req api.AdminRoomArchiveRequestObject) (api.AdminRoomArchiveResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_room_archive", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminRoom, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminRoom{}, err
		}
		r, err := lockedBoxRoom(ctx, tx, b.ID, req.RoomId)
		if err != nil {
			return api.AdminRoom{}, err
		}
		r.Status = "archived"
		return adminRoom(r), tx.ArchiveRoom(ctx, b.ID, r.ID)
	})
	if err != nil {
		return nil, err
	}
	return api.AdminRoomArchive200JSONResponse(out), nil
}

// AdminRoomSetOwner makes an active member (agent_id or box-unique name) the owner.
func (s *Service) AdminRoomSetOwner(ctx context.Context, req api.AdminRoomSetOwnerRequestObject) (api.AdminRoomSetOwnerResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_room_set_owner", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminRoom, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminRoom{}, err
		}
		r, err := lockedBoxRoom(ctx, tx, b.ID, req.RoomId)
		if err != nil {
			return api.AdminRoom{}, err
		}
		a, err := agentByRef(ctx, tx, b.ID, req.Body.AgentRef)
		if err != nil {
			return api.AdminRoom{}, err
		}
		states, err := tx.RoomMemberStates(ctx, b.ID, r.ID, []uuid.UUID{a.ID})
		if err != nil {
			return api.AdminRoom{}, err
		}
		if states[a.ID] != "active" {
			return api.AdminRoom{}, apierr.Invalid("agent_ref", "the new owner must be an active member of the room").WithReason("not_a_member")
		}
		if !a.Enabled { // a disabled owner could neither invite nor be reached: the room would have no one to run it
			return api.AdminRoom{}, apierr.Invalid("agent_ref", "the new owner must be an enabled agent").WithReason("agent_disabled")
		}
		r.OwnerAgentID = a.ID
		return adminRoom(r), tx.SetRoomOwner(ctx, b.ID, r.ID, a.ID)
	})
	if err != nil {
		return nil, err
	}
	return api.AdminRoomSetOwner200JSONResponse(out), nil
}
