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

// withinBudget cuts a page's items to the response byte budget (SPEC §9): the leading items
// that fit (fitBudget; the first is always kept, even above the budget, so that paging always
// advances). A page the budget cut is never complete, and its cursor belongs at its last item,
// so no dropped row is skipped. complete says whether the page was complete before the cut.
func withinBudget[T any](c *call, items []T, complete bool) ([]T, bool, error) {
	n, err := fitBudget(items, c.settings.ResponseBudgetBytes)
	if err != nil {
		return nil, false, err
	}
	if n < len(items) {
		return items[:n], false, nil
	}
	return items, complete, nil
}

// listScope is what a keyset list's cursor is scoped to (besides the agent).
type listScope struct {
	stream, filter string
	epoch          int64
}

// keysetPage is a keyset list's page (room_list, request_list, directory_search,
// file_report_list) from rows read with one row more than limit: at most limit items within
// the response byte budget, as the streams' pages (withinBudget), and the next_cursor at the
// last row returned (pos gives its position) — nil when the rows are exhausted; a page cut by
// the limit or by the budget always has one.
func keysetPage[R, T any](ctx context.Context, s *Service, c *call, rows []R, limit int64, dto func(R) T,
	scope listScope, pos func(R) any) ([]T, *string, error) {
	complete := int64(len(rows)) <= limit
	if !complete {
		rows = rows[:limit]
	}
	items := make([]T, 0, len(rows))
	for _, r := range rows {
		items = append(items, dto(r))
	}
	items, complete, err := withinBudget(c, items, complete)
	if err != nil || complete {
		return items, nil, err
	}
	next, err := s.encodeCursor(ctx, c, scope.stream, scope.filter, scope.epoch, pos(rows[len(items)-1]))
	return items, next, err
}
