package service

// Not yet implemented: each method below is replaced by its real implementation
// (and deleted from this file) when its feature lands.

import (
	"context"

	"github.com/agentbox/agentbox/gen/api"
)

func (s *Service) ConversationRead(ctx context.Context, req api.ConversationReadRequestObject) (api.ConversationReadResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) MessageSend(ctx context.Context, req api.MessageSendRequestObject) (api.MessageSendResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) MessageSendBatch(ctx context.Context, req api.MessageSendBatchRequestObject) (api.MessageSendBatchResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) MessageGet(ctx context.Context, req api.MessageGetRequestObject) (api.MessageGetResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) ThreadRead(ctx context.Context, req api.ThreadReadRequestObject) (api.ThreadReadResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Service) ThreadExport(ctx context.Context, req api.ThreadExportRequestObject) (api.ThreadExportResponseObject, error) {
	return nil, errNotImplemented
}
