package service

import (
	"context"
	"math"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/store"
)

// The directory (SPEC §4) shows listed, enabled agents of the caller's box as public cards.
// Anything else — unlisted, disabled, another box's or unknown — is one uniform
// NOT_FOUND_OR_FORBIDDEN, so the directory reveals nothing about agents that opted out.

func cardOf(c store.Card) api.Card {
	rev := dec(c.CardRevision)
	return api.Card{AgentId: c.AgentID, Name: c.Name, Role: c.Role, Description: c.Description,
		HostName: c.HostName, LastSeenAt: c.LastSeenAt, CardRevision: &rev}
}

// likeSubstring is an ILIKE pattern matching s literally as a substring: the pattern
// characters %, _ and the escape character \ are escaped.
func likeSubstring(s string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s) + "%"
}

// pageProbe is how many rows a keyset page reads: one more than limit, to know whether a
// next page exists.
func pageProbe(limit int64) int32 {
	return int32(min(limit+1, math.MaxInt32))
}

// directoryPos is the directory_search cursor position: the last card returned.
type directoryPos struct {
	Name    string    `json:"n"`
	AgentID uuid.UUID `json:"a"`
}

// DirectorySearch finds listed, enabled agents whose name or role contains the query
// (case-insensitive, literally), ordered by (name, agent_id), keyset-paged.
func (s *Service) DirectorySearch(ctx context.Context, req api.DirectorySearchRequestObject) (api.DirectorySearchResponseObject, error) {
	query := req.Params.Query
	out, err := runRead(ctx, s, "directory_search", func(ctx context.Context, tx *store.Tx, c *call) (api.CardPage, error) {
		if query == "" {
			return api.CardPage{}, apierr.Invalid("query", "must not be empty")
		}
		var after directoryPos
		if req.Params.Cursor != nil {
			if err := s.decodeCursor(ctx, c, "directory", query, 0, *req.Params.Cursor, &after); err != nil {
				return api.CardPage{}, err
			}
		}
		limit := clampLimit(req.Params.Limit, c.settings)
		cards, err := tx.SearchDirectory(ctx, c.p.BoxID, likeSubstring(query),
			store.DirectoryPos{Name: after.Name, AgentID: after.AgentID}, pageProbe(limit))
		if err != nil {
			return api.CardPage{}, err
		}
		items, next, err := keysetPage(ctx, s, c, cards, limit, cardOf, listScope{stream: "directory", filter: query},
			func(r store.Card) any { return directoryPos{Name: r.Name, AgentID: r.AgentID} })
		return api.CardPage{Items: items, NextCursor: next}, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DirectoryGet returns one listed, enabled agent's card.
func (s *Service) DirectoryGet(ctx context.Context, req api.DirectoryGetRequestObject) (api.DirectoryGetResponseObject, error) {
	out, err := runRead(ctx, s, "directory_get", func(ctx context.Context, tx *store.Tx, c *call) (api.Card, error) {
		card, err := tx.Card(ctx, c.p.BoxID, req.AgentId)
		if err == store.ErrNotFound || (err == nil && !(card.Listed && card.Enabled)) {
			return api.Card{}, apierr.NotFound()
		}
		if err != nil {
			return api.Card{}, err
		}
		return cardOf(card), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DirectoryUpdateSelf is a compare-and-set on card_revision over the caller's own role and
// description; it returns the caller's card, listed or not.
func (s *Service) DirectoryUpdateSelf(ctx context.Context, req api.DirectoryUpdateSelfRequestObject) (api.DirectoryUpdateSelfResponseObject, error) {
	in := req.Body
	role, description := in.Patch.Role, in.Patch.Description
	switch {
	case role == nil && description == nil:
		return nil, apierr.Invalid("patch", "name at least one field to change (role, description)").WithReason("empty_patch")
	case role != nil && len(*role) > CardRoleMaxBytes:
		return nil, apierr.TooLong("patch.role", int64(CardRoleMaxBytes))
	case description != nil && len(*description) > CardDescriptionMaxBytes:
		return nil, apierr.TooLong("patch.description", int64(CardDescriptionMaxBytes))
	}
	expected, err := parseDec("expected_revision", in.ExpectedRevision)
	if err != nil {
		return nil, err
	}
	m := mutation{op: "directory_update_self", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"expected_revision": dec(expected), "patch": in.Patch}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.Card, error) {
		ok, err := tx.UpdateCard(ctx, c.p.BoxID, c.p.AgentID, expected, role, description)
		if err != nil {
			return api.Card{}, err
		}
		card, err := tx.Card(ctx, c.p.BoxID, c.p.AgentID)
		if err != nil {
			return api.Card{}, err
		}
		if !ok {
			return api.Card{}, apierr.Conflict(card.CardRevision).WithField("expected_revision")
		}
		return cardOf(card), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
