package service

import (
	"context"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/cursor"
)

// clampLimit applies SPEC §9: a limit is clamped to [1, page_limit_max], never rejected;
// absent, it is page_limit_default.
func clampLimit(limit *int64, s api.SettingsValues) int64 {
	if limit == nil {
		return min(max(s.PageLimitDefault, 1), s.PageLimitMax)
	}
	return min(max(*limit, 1), s.PageLimitMax)
}

// encodeCursor signs pos for the caller's scope.
func (s *Service) encodeCursor(ctx context.Context, c *call, stream, filter string, epoch int64, pos any) (*string, error) {
	tok, err := s.cursors.Encode(cursor.Scope{Agent: c.p.AgentID.String(), Stream: stream, Filter: filter, Epoch: epoch}, pos)
	if err != nil {
		return nil, err
	}
	return &tok, nil
}

// decodeCursor checks a cursor against the caller's scope; any mismatch is CURSOR_INVALID.
func (s *Service) decodeCursor(ctx context.Context, c *call, stream, filter string, epoch int64, token string, pos any) error {
	if s.cursors.Decode(cursor.Scope{Agent: c.p.AgentID.String(), Stream: stream, Filter: filter, Epoch: epoch}, token, pos) != nil {
		return apierr.New(apierr.CursorInvalid, "the cursor is not valid for this caller, stream and filter").
			WithField("cursor").WithSuggestion("start again without a cursor")
	}
	return nil
}
