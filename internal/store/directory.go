package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Card is an agent's public directory card (no keys, IPs or profile).
type Card struct {
	AgentID      uuid.UUID
	Name         string
	Role         string
	Description  string
	HostName     string
	CardRevision int64
	LastSeenAt   *time.Time
	Listed       bool
	Enabled      bool
}

// DirectoryPos is a keyset position in the directory order (name, agent_id); the zero
// value precedes every agent.
type DirectoryPos struct {
	Name    string
	AgentID uuid.UUID
}

// SearchDirectory returns up to limit listed, enabled agents of the box after pos whose name
// or role matches the ILIKE pattern (the caller escapes it).
func (t *Tx) SearchDirectory(ctx context.Context, boxID uuid.UUID, pattern string, after DirectoryPos, limit int32) ([]Card, error) {
	rows, err := t.q.SearchDirectory(ctx, db.SearchDirectoryParams{BoxID: boxID, Pattern: pattern,
		AfterName: after.Name, AfterAgentID: after.AgentID, MaxRows: limit})
	out := make([]Card, 0, len(rows))
	for _, r := range rows {
		out = append(out, Card{AgentID: r.AgentID, Name: r.Name, Role: r.Role, Description: r.Description,
			HostName: r.HostName, CardRevision: r.CardRevision, LastSeenAt: r.LastSeenAt, Listed: true, Enabled: true})
	}
	return out, err
}

// Card loads one agent's card with its listed/enabled flags; ErrNotFound when no such agent is in the box.
func (t *Tx) Card(ctx context.Context, boxID, agentID uuid.UUID) (Card, error) {
	r, err := one(t.q.GetCard(ctx, db.GetCardParams{BoxID: boxID, AgentID: agentID}))
	return Card{AgentID: r.AgentID, Name: r.Name, Role: r.Role, Description: r.Description, HostName: r.HostName,
		CardRevision: r.CardRevision, LastSeenAt: r.LastSeenAt, Listed: r.Listed, Enabled: r.Enabled}, err
}

// UpdateCard is a compare-and-set on card_revision over role and description (nil leaves a
// field alone); ok is false when expected is stale.
func (t *Tx) UpdateCard(ctx context.Context, boxID, agentID uuid.UUID, expected int64, role, description *string) (bool, error) {
	_, err := one(t.q.UpdateCard(ctx, db.UpdateCardParams{BoxID: boxID, AgentID: agentID, ExpectedRevision: expected,
		Role: role, Description: description}))
	if err == ErrNotFound {
		return false, nil
	}
	return err == nil, err
}
