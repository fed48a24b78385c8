package service

// Not yet implemented: each method below is replaced by its real implementation
// (and deleted from this file) when its feature lands.

import (
	"context"

	"github.com/agentbox/agentbox/gen/api"
)

func (s *Service) AdminCleanupStatus(ctx context.Context, req api.AdminCleanupStatusRequestObject) (api.AdminCleanupStatusResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) InboxList(ctx context.Context, req api.InboxListRequestObject) (api.InboxListResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) InboxAck(ctx context.Context, req api.InboxAckRequestObject) (api.InboxAckResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) InboxClaim(ctx context.Context, req api.InboxClaimRequestObject) (api.InboxClaimResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) FileReportList(ctx context.Context, req api.FileReportListRequestObject) (api.FileReportListResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) FileAccessReport(ctx context.Context, req api.FileAccessReportRequestObject) (api.FileAccessReportResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RequestList(ctx context.Context, req api.RequestListRequestObject) (api.RequestListResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) RequestRespond(ctx context.Context, req api.RequestRespondRequestObject) (api.RequestRespondResponseObject, error) {
	return nil, errNotImplemented
}
