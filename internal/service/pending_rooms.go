package service

// Not yet implemented: each method below is replaced by its real implementation
// (and deleted from this file) when its feature lands.

import (
	"context"

	"github.com/agentbox/agentbox/gen/api"
)

func (s *Service) AdminRoomList(ctx context.Context, req api.AdminRoomListRequestObject) (api.AdminRoomListResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) AdminRoomArchive(ctx context.Context, req api.AdminRoomArchiveRequestObject) (api.AdminRoomArchiveResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) AdminRoomSetOwner(ctx context.Context, req api.AdminRoomSetOwnerRequestObject) (api.AdminRoomSetOwnerResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) DirectorySearch(ctx context.Context, req api.DirectorySearchRequestObject) (api.DirectorySearchResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) DirectoryUpdateSelf(ctx context.Context, req api.DirectoryUpdateSelfRequestObject) (api.DirectoryUpdateSelfResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) DirectoryGet(ctx context.Context, req api.DirectoryGetRequestObject) (api.DirectoryGetResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomList(ctx context.Context, req api.RoomListRequestObject) (api.RoomListResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomCreate(ctx context.Context, req api.RoomCreateRequestObject) (api.RoomCreateResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomGet(ctx context.Context, req api.RoomGetRequestObject) (api.RoomGetResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomBriefGet(ctx context.Context, req api.RoomBriefGetRequestObject) (api.RoomBriefGetResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomBriefUpdate(ctx context.Context, req api.RoomBriefUpdateRequestObject) (api.RoomBriefUpdateResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomFollow(ctx context.Context, req api.RoomFollowRequestObject) (api.RoomFollowResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomInvite(ctx context.Context, req api.RoomInviteRequestObject) (api.RoomInviteResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomJoin(ctx context.Context, req api.RoomJoinRequestObject) (api.RoomJoinResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RoomLeave(ctx context.Context, req api.RoomLeaveRequestObject) (api.RoomLeaveResponseObject, error) {
	return nil, errNotImplemented
}
