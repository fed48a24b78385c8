package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Box is a tenant.
type Box struct {
	ID               uuid.UUID
	Key              string
	Name             string
	Enabled          bool
	Settings         json.RawMessage // only the overridden keys
	SettingsRevision int64
	CreatedAt        time.Time
}

func boxFrom(b db.Box) Box {
	return Box{ID: b.BoxID, Key: b.BoxKey, Name: b.Name, Enabled: b.Enabled, Settings: b.Settings,
		SettingsRevision: b.SettingsRevision, CreatedAt: b.CreatedAt}
}

// Host is a registered machine with its exact source IPs.
type Host struct {
	ID        uuid.UUID
	Name      string
	IPs       []string
	CreatedAt time.Time
}

func hostFrom(h db.Host) Host {
	return Host{ID: h.HostID, Name: h.Name, IPs: h.Ips, CreatedAt: h.CreatedAt}
}

// Agent is an identity in a box.
type Agent struct {
	BoxID          uuid.UUID
	ID             uuid.UUID
	HostID         uuid.UUID
	HostName       string
	Name           string
	Enabled        bool
	Listed         bool
	Role           string
	Description    string
	CardRevision   int64
	ProfileText    string
	ProfileVersion int64
	LastSeenAt     *time.Time
	CreatedAt      time.Time
}

func agentFrom(a db.Agent, hostName string) Agent {
	return Agent{BoxID: a.BoxID, ID: a.AgentID, HostID: a.HostID, HostName: hostName, Name: a.Name,
		Enabled: a.Enabled, Listed: a.Listed, Role: a.Role, Description: a.Description,
		CardRevision: a.CardRevision, ProfileText: a.ProfileText, ProfileVersion: a.ProfileVersion,
		LastSeenAt: a.LastSeenAt, CreatedAt: a.CreatedAt}
}

// APIKey is an agent credential (its hash only).
type APIKey struct {
	ID        uuid.UUID
	AgentID   uuid.UUID
	Router    bool
	CreatedAt time.Time
	RevokedAt *time.Time
}

func keyFrom(k db.ApiKey) APIKey {
	return APIKey{ID: k.KeyID, AgentID: k.AgentID, Router: k.Router, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// CreateBox inserts a box; ok is false when the key is taken.
func (t *Tx) CreateBox(ctx context.Context, key, name string, now time.Time) (Box, bool, error) {
	b, err := one(t.q.CreateBox(ctx, db.CreateBoxParams{BoxID: uuid.New(), BoxKey: key, Name: name, Now: now}))
	if err == ErrNotFound {
		return Box{}, false, nil
	}
	return boxFrom(b), err == nil, err
}

// BoxByKey finds a box by its public key.
func (t *Tx) BoxByKey(ctx context.Context, key string) (Box, error) {
	b, err := one(t.q.GetBoxByKey(ctx, key))
	return boxFrom(b), err
}

// Boxes lists every box.
func (t *Tx) Boxes(ctx context.Context) ([]Box, error) {
	rows, err := t.q.ListBoxes(ctx)
	out := make([]Box, 0, len(rows))
	for _, b := range rows {
		out = append(out, boxFrom(b))
	}
	return out, err
}

// UpdateBox changes the name and/or enabled flag (nil leaves a field alone).
func (t *Tx) UpdateBox(ctx context.Context, boxID uuid.UUID, name *string, enabled *bool) (Box, error) {
	b, err := one(t.q.UpdateBox(ctx, db.UpdateBoxParams{BoxID: boxID, Name: name, Enabled: enabled}))
	return boxFrom(b), err
}

// LockBoxSettings reads the overrides and revision, locking the box row until commit.
func (t *Tx) LockBoxSettings(ctx context.Context, boxID uuid.UUID) (json.RawMessage, int64, error) {
	r, err := one(t.q.LockBoxSettings(ctx, boxID))
	return r.Settings, r.SettingsRevision, err
}

// SetBoxSettings stores the overrides and bumps the revision.
func (t *Tx) SetBoxSettings(ctx context.Context, boxID uuid.UUID, overrides json.RawMessage) (int64, error) {
	r, err := one(t.q.SetBoxSettings(ctx, db.SetBoxSettingsParams{BoxID: boxID, Settings: overrides}))
	return r.SettingsRevision, err
}

// CreateHost inserts a host; ok is false when the name is taken in the box.
func (t *Tx) CreateHost(ctx context.Context, boxID uuid.UUID, name string, ips []string, now time.Time) (Host, bool, error) {
	h, err := one(t.q.CreateHost(ctx, db.CreateHostParams{BoxID: boxID, HostID: uuid.New(), Name: name, Ips: ips, Now: now}))
	if err == ErrNotFound {
		return Host{}, false, nil
	}
	return hostFrom(h), err == nil, err
}

// HostByName finds a host in a box.
func (t *Tx) HostByName(ctx context.Context, boxID uuid.UUID, name string) (Host, error) {
	h, err := one(t.q.GetHostByName(ctx, db.GetHostByNameParams{BoxID: boxID, Name: name}))
	return hostFrom(h), err
}

// Hosts lists a box's hosts.
func (t *Tx) Hosts(ctx context.Context, boxID uuid.UUID) ([]Host, error) {
	rows, err := t.q.ListHosts(ctx, boxID)
	out := make([]Host, 0, len(rows))
	for _, h := range rows {
		out = append(out, hostFrom(h))
	}
	return out, err
}

// SetHostIPs replaces a host's IPs.
func (t *Tx) SetHostIPs(ctx context.Context, boxID uuid.UUID, name string, ips []string) (Host, error) {
	h, err := one(t.q.SetHostIPs(ctx, db.SetHostIPsParams{BoxID: boxID, Name: name, Ips: ips}))
	return hostFrom(h), err
}

// NewAgent is the input of CreateAgent.
type NewAgent struct {
	BoxID       uuid.UUID
	Host        Host
	Name        string
	Listed      bool
	Role        string
	Description string
	ProfileText string
}

// CreateAgent inserts an agent; ok is false when the name is taken on the host.
func (t *Tx) CreateAgent(ctx context.Context, n NewAgent, now time.Time) (Agent, bool, error) {
	a, err := one(t.q.CreateAgent(ctx, db.CreateAgentParams{BoxID: n.BoxID, AgentID: uuid.New(), HostID: n.Host.ID,
		Name: n.Name, Listed: n.Listed, Role: n.Role, Description: n.Description, ProfileText: n.ProfileText, Now: now}))
	if err == ErrNotFound {
		return Agent{}, false, nil
	}
	return agentFrom(a, n.Host.Name), err == nil, err
}

// AgentByID loads an agent with its host name.
func (t *Tx) AgentByID(ctx context.Context, boxID, agentID uuid.UUID) (Agent, error) {
	r, err := one(t.q.GetAgentWithHost(ctx, db.GetAgentWithHostParams{BoxID: boxID, AgentID: agentID}))
	return agentFrom(r.Agent, r.HostName), err
}

// AgentIDsByName returns up to two agents with that name in the box (two means ambiguous).
func (t *Tx) AgentIDsByName(ctx context.Context, boxID uuid.UUID, name string) ([]uuid.UUID, error) {
	return t.q.FindAgentsByName(ctx, db.FindAgentsByNameParams{BoxID: boxID, Name: name})
}

// Agents lists a box's agents.
func (t *Tx) Agents(ctx context.Context, boxID uuid.UUID) ([]Agent, error) {
	rows, err := t.q.ListAgentsWithHost(ctx, boxID)
	out := make([]Agent, 0, len(rows))
	for _, r := range rows {
		out = append(out, agentFrom(r.Agent, r.HostName))
	}
	return out, err
}

// UpdateAgentFlags sets enabled/listed (nil leaves a flag alone).
func (t *Tx) UpdateAgentFlags(ctx context.Context, boxID, agentID uuid.UUID, enabled, listed *bool) error {
	_, err := one(t.q.UpdateAgentFlags(ctx, db.UpdateAgentFlagsParams{BoxID: boxID, AgentID: agentID, Enabled: enabled, Listed: listed}))
	return err
}

// SetAgentProfile replaces the private profile and returns the new version.
func (t *Tx) SetAgentProfile(ctx context.Context, boxID, agentID uuid.UUID, text string) (int64, error) {
	r, err := one(t.q.SetAgentProfile(ctx, db.SetAgentProfileParams{BoxID: boxID, AgentID: agentID, ProfileText: text}))
	return r.ProfileVersion, err
}

// AgentProfile reads the private profile.
func (t *Tx) AgentProfile(ctx context.Context, boxID, agentID uuid.UUID) (string, int64, error) {
	r, err := one(t.q.GetAgentProfile(ctx, db.GetAgentProfileParams{BoxID: boxID, AgentID: agentID}))
	return r.ProfileText, r.ProfileVersion, err
}

// CreateAPIKey stores a key hash for an agent.
func (t *Tx) CreateAPIKey(ctx context.Context, boxID, agentID uuid.UUID, hash []byte, router bool, now time.Time) (APIKey, error) {
	k, err := t.q.CreateAPIKey(ctx, db.CreateAPIKeyParams{BoxID: boxID, KeyID: uuid.New(), AgentID: agentID, KeyHash: hash, Router: router, Now: now})
	return keyFrom(k), err
}

// APIKeys lists an agent's keys.
func (t *Tx) APIKeys(ctx context.Context, boxID, agentID uuid.UUID) ([]APIKey, error) {
	rows, err := t.q.ListAPIKeys(ctx, db.ListAPIKeysParams{BoxID: boxID, AgentID: agentID})
	out := make([]APIKey, 0, len(rows))
	for _, k := range rows {
		out = append(out, keyFrom(k))
	}
	return out, err
}

// RevokeAPIKey revokes a key (the first revocation time is kept).
func (t *Tx) RevokeAPIKey(ctx context.Context, boxID, keyID uuid.UUID, now time.Time) (APIKey, error) {
	k, err := one(t.q.RevokeAPIKey(ctx, db.RevokeAPIKeyParams{BoxID: boxID, KeyID: keyID, Now: &now}))
	return keyFrom(k), err
}

// KeyCredential is everything agent authentication checks about one key.
type KeyCredential struct {
	BoxID        uuid.UUID
	BoxKey       string
	BoxEnabled   bool
	KeyID        uuid.UUID
	Router       bool
	Revoked      bool
	AgentID      uuid.UUID
	AgentName    string
	AgentEnabled bool
	HostName     string
	HostIPs      []string
	BoxSettings  json.RawMessage // the box's settings overrides (for the per-key rate limit)
}

// KeyCredential looks a key hash up within the named box.
func (s *Store) KeyCredential(ctx context.Context, boxKey string, hash []byte) (KeyCredential, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	r, err := one(db.New(s.pool).AuthenticateKey(ctx, db.AuthenticateKeyParams{BoxKey: boxKey, KeyHash: hash}))
	return credentialFrom(r), err
}

func credentialFrom(r db.AuthenticateKeyRow) KeyCredential {
	return KeyCredential{BoxID: r.BoxID, BoxKey: r.BoxKey, BoxEnabled: r.BoxEnabled, KeyID: r.KeyID, Router: r.Router,
		Revoked: r.RevokedAt != nil, AgentID: r.AgentID, AgentName: r.AgentName, AgentEnabled: r.AgentEnabled,
		HostName: r.HostName, HostIPs: r.Ips, BoxSettings: r.BoxSettings}
}

// AdminTokenLive reports whether an issued admin token hash is live.
func (s *Store) AdminTokenLive(ctx context.Context, hash []byte) (bool, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return db.New(s.pool).AdminTokenLive(ctx, hash)
}

// AdminToken is an issued admin token (its hash only).
type AdminToken struct {
	ID        uuid.UUID
	Label     string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// CreateAdminToken stores an issued admin token's hash.
func (t *Tx) CreateAdminToken(ctx context.Context, hash []byte, label string, now time.Time) (AdminToken, error) {
	r, err := t.q.CreateAdminToken(ctx, db.CreateAdminTokenParams{TokenID: uuid.New(), TokenHash: hash, Label: label, Now: now})
	return AdminToken{ID: r.TokenID, Label: r.Label, CreatedAt: r.CreatedAt}, err
}

// AdminTokens lists every issued admin token, oldest first.
func (t *Tx) AdminTokens(ctx context.Context) ([]AdminToken, error) {
	rows, err := t.q.ListAdminTokens(ctx)
	out := make([]AdminToken, 0, len(rows))
	for _, r := range rows {
		out = append(out, AdminToken{ID: r.TokenID, Label: r.Label, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt})
	}
	return out, err
}

// RevokeAdminToken revokes an issued admin token (the first revocation time is kept).
func (t *Tx) RevokeAdminToken(ctx context.Context, id uuid.UUID, now time.Time) (AdminToken, error) {
	r, err := one(t.q.RevokeAdminToken(ctx, db.RevokeAdminTokenParams{TokenID: id, Now: &now}))
	return AdminToken{ID: r.TokenID, Label: r.Label, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}, err
}

// KeyCredentialAnyBox looks a key hash up across boxes (the MCP endpoint authenticates the
// key before it knows the box; every tool call then names the box). ErrNotFound unless
// exactly one key has the hash.
func (s *Store) KeyCredentialAnyBox(ctx context.Context, hash []byte) (KeyCredential, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	rows, err := db.New(s.pool).AuthenticateKeyAnyBox(ctx, hash)
	if err != nil {
		return KeyCredential{}, err
	}
	if len(rows) != 1 {
		return KeyCredential{}, ErrNotFound
	}
	r := rows[0]
	return KeyCredential{BoxID: r.BoxID, BoxKey: r.BoxKey, BoxEnabled: r.BoxEnabled, KeyID: r.KeyID, Router: r.Router,
		Revoked: r.RevokedAt != nil, AgentID: r.AgentID, AgentName: r.AgentName, AgentEnabled: r.AgentEnabled,
		HostName: r.HostName, HostIPs: r.Ips, BoxSettings: r.BoxSettings}, nil
}
