package service

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/store"
)

// Admin operations manage boxes, hosts, agents, keys, profiles and settings. Admins never
// post messages, act as agents, or read message bodies. The transport has already
// authenticated the admin token.

func adminBox(b store.Box) api.AdminBox {
	return api.AdminBox{BoxId: b.ID, BoxKey: b.Key, Name: b.Name, Enabled: b.Enabled,
		SettingsRevision: dec(b.SettingsRevision), CreatedAt: b.CreatedAt}
}

func adminHost(h store.Host) api.AdminHost {
	return api.AdminHost{HostId: h.ID, Name: h.Name, Ips: h.IPs, CreatedAt: h.CreatedAt}
}

func adminAgent(a store.Agent) api.AdminAgent {
	return api.AdminAgent{AgentId: a.ID, Name: a.Name, HostName: a.HostName, Enabled: a.Enabled, Listed: a.Listed,
		Role: a.Role, Description: a.Description, ProfileVersion: dec(a.ProfileVersion), CardRevision: dec(a.CardRevision),
		LastSeenAt: a.LastSeenAt, CreatedAt: a.CreatedAt}
}

func adminKey(k store.APIKey) api.AdminKey {
	return api.AdminKey{KeyId: k.ID, AgentId: k.AgentID, Router: k.Router, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// box resolves a box_key for an admin call.
func box(ctx context.Context, tx *store.Tx, key string) (store.Box, error) {
	b, err := tx.BoxByKey(ctx, key)
	if err == store.ErrNotFound {
		return b, apierr.NotFound().WithField("box_key")
	}
	return b, err
}

// boxAgent resolves the box_key and agent_ref of an admin call on an agent.
func boxAgent(ctx context.Context, tx *store.Tx, boxKey, agentRef string) (store.Box, store.Agent, error) {
	b, err := box(ctx, tx, boxKey)
	if err != nil {
		return b, store.Agent{}, err
	}
	a, err := agentByRef(ctx, tx, b.ID, agentRef)
	return b, a, err
}

// agentByRef resolves an agent_id or a box-unique agent name.
func agentByRef(ctx context.Context, tx *store.Tx, boxID uuid.UUID, ref string) (store.Agent, error) {
	id, err := uuid.Parse(ref)
	if err != nil {
		ids, err := tx.AgentIDsByName(ctx, boxID, ref)
		if err != nil {
			return store.Agent{}, err
		}
		switch len(ids) {
		case 0:
			return store.Agent{}, apierr.NotFound().WithField("agent_ref")
		case 1:
			id = ids[0]
		default:
			return store.Agent{}, apierr.Invalid("agent_ref", "several agents have this name; use the agent_id").WithReason("ambiguous_name")
		}
	}
	a, err := tx.AgentByID(ctx, boxID, id)
	if err == store.ErrNotFound {
		return a, apierr.NotFound().WithField("agent_ref")
	}
	return a, err
}

// normalizeIPs returns a host's IPs as stored and compared (auth.NormalizeIP), in the order
// given. Each may be named once, after normalization: ::ffff:10.0.0.1 is 10.0.0.1, so a list
// naming both would store one address twice.
func normalizeIPs(ips []string) ([]string, error) {
	out := make([]string, 0, len(ips))
	seen := make(map[string]bool, len(ips))
	for i, ip := range ips {
		n, ok := auth.NormalizeIP(ip)
		if !ok {
			return nil, apierr.Invalid(fieldIndex("ips", i), "must be an exact IPv4 or IPv6 address (no CIDR range, no DNS name)")
		}
		if seen[n] {
			return nil, apierr.Invalid(fieldIndex("ips", i), "each IP may be named once (an IPv4-mapped IPv6 address is its IPv4 address)").WithReason("duplicate_ip")
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

func (s *Service) AdminBoxList(ctx context.Context, req api.AdminBoxListRequestObject) (api.AdminBoxListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_box_list", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminBoxList, error) {
		boxes, err := tx.Boxes(ctx)
		items := make([]api.AdminBox, 0, len(boxes))
		for _, b := range boxes {
			items = append(items, adminBox(b))
		}
		return api.AdminBoxList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminBoxList200JSONResponse(out), nil
}

func (s *Service) AdminBoxCreate(ctx context.Context, req api.AdminBoxCreateRequestObject) (api.AdminBoxCreateResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_box_create", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminBox, error) {
		name := ""
		if req.Body.Name != nil {
			name = *req.Body.Name
		}
		b, ok, err := tx.CreateBox(ctx, req.Body.BoxKey, name, now)
		if err == nil && !ok {
			err = apierr.Invalid("box_key", "a box with this box_key exists").WithReason("already_exists")
		}
		return adminBox(b), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminBoxCreate200JSONResponse(out), nil
}

func (s *Service) AdminBoxUpdate(ctx context.Context, req api.AdminBoxUpdateRequestObject) (api.AdminBoxUpdateResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_box_update", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminBox, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminBox{}, err
		}
		b, err = tx.UpdateBox(ctx, b.ID, req.Body.Name, req.Body.Enabled)
		return adminBox(b), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminBoxUpdate200JSONResponse(out), nil
}

func (s *Service) AdminHostList(ctx context.Context, req api.AdminHostListRequestObject) (api.AdminHostListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_host_list", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminHostList, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminHostList{}, err
		}
		hosts, err := tx.Hosts(ctx, b.ID)
		items := make([]api.AdminHost, 0, len(hosts))
		for _, h := range hosts {
			items = append(items, adminHost(h))
		}
		return api.AdminHostList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminHostList200JSONResponse(out), nil
}

func (s *Service) AdminHostCreate(ctx context.Context, req api.AdminHostCreateRequestObject) (api.AdminHostCreateResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_host_create", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminHost, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminHost{}, err
		}
		ips, err := normalizeIPs(req.Body.Ips)
		if err != nil {
			return api.AdminHost{}, err
		}
		h, ok, err := tx.CreateHost(ctx, b.ID, req.Body.Name, ips, now)
		if err == nil && !ok {
			err = apierr.Invalid("name", "a host with this name exists in the box").WithReason("already_exists")
		}
		return adminHost(h), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminHostCreate200JSONResponse(out), nil
}

func (s *Service) AdminHostUpdate(ctx context.Context, req api.AdminHostUpdateRequestObject) (api.AdminHostUpdateResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_host_update", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminHost, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminHost{}, err
		}
		ips, err := normalizeIPs(req.Body.Ips)
		if err != nil {
			return api.AdminHost{}, err
		}
		h, err := tx.SetHostIPs(ctx, b.ID, req.HostName, ips)
		if err == store.ErrNotFound {
			err = apierr.NotFound().WithField("host_name")
		}
		return adminHost(h), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminHostUpdate200JSONResponse(out), nil
}

func (s *Service) AdminAgentList(ctx context.Context, req api.AdminAgentListRequestObject) (api.AdminAgentListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_agent_list", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminAgentList, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminAgentList{}, err
		}
		agents, err := tx.Agents(ctx, b.ID)
		items := make([]api.AdminAgent, 0, len(agents))
		for _, a := range agents {
			items = append(items, adminAgent(a))
		}
		return api.AdminAgentList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminAgentList200JSONResponse(out), nil
}

func (s *Service) AdminAgentCreate(ctx context.Context, req api.AdminAgentCreateRequestObject) (api.AdminAgentCreateResponseObject, error) {
	in := req.Body
	profile := deref(in.ProfileText)
	switch {
	case len(profile) > ProfileMaxBytes:
		return nil, apierr.TooLong("profile_text", int64(ProfileMaxBytes))
	case len(deref(in.Role)) > CardRoleMaxBytes:
		return nil, apierr.TooLong("role", int64(CardRoleMaxBytes))
	case len(deref(in.Description)) > CardDescriptionMaxBytes:
		return nil, apierr.TooLong("description", int64(CardDescriptionMaxBytes))
	}
	if _, err := uuid.Parse(in.Name); err == nil { // agentByRef would take it for an ID
		return nil, apierr.Invalid("name", "must not read as an agent ID (a UUID): agent_ref takes names and IDs").WithReason("name_like_id")
	}
	apiKey := auth.NewSecret(auth.AgentKeyPrefix)
	out, err := runAdmin(ctx, s, "admin_agent_create", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminAgentCreateResult, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminAgentCreateResult{}, err
		}
		h, err := tx.HostByName(ctx, b.ID, in.HostName)
		if err == store.ErrNotFound {
			return api.AdminAgentCreateResult{}, apierr.NotFound().WithField("host_name")
		}
		if err != nil {
			return api.AdminAgentCreateResult{}, err
		}
		a, ok, err := tx.CreateAgent(ctx, store.NewAgent{BoxID: b.ID, Host: h, Name: in.Name, Listed: deref(in.Listed),
			Role: deref(in.Role), Description: deref(in.Description), ProfileText: profile}, now)
		if err != nil {
			return api.AdminAgentCreateResult{}, err
		}
		if !ok {
			return api.AdminAgentCreateResult{}, apierr.Invalid("name", "an agent with this name exists on the host").WithReason("already_exists")
		}
		k, err := tx.CreateAPIKey(ctx, b.ID, a.ID, auth.HashSecret(apiKey), false, now)
		return api.AdminAgentCreateResult{Agent: adminAgent(a), KeyId: k.ID, ApiKey: apiKey}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminAgentCreate200JSONResponse(out), nil
}

func (s *Service) AdminAgentUpdate(ctx context.Context, req api.AdminAgentUpdateRequestObject) (api.AdminAgentUpdateResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_agent_update", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminAgent, error) {
		b, a, err := boxAgent(ctx, tx, req.BoxKey, req.AgentRef)
		if err != nil {
			return api.AdminAgent{}, err
		}
		if err := tx.UpdateAgentFlags(ctx, b.ID, a.ID, req.Body.Enabled, req.Body.Listed); err != nil {
			return api.AdminAgent{}, err
		}
		a, err = tx.AgentByID(ctx, b.ID, a.ID)
		return adminAgent(a), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminAgentUpdate200JSONResponse(out), nil
}

// AdminAgentProfileGet reads an agent's private profile (admin-authored text), so an admin
// edits it knowing what it says; it records nothing (profile_get is the agent's read).
func (s *Service) AdminAgentProfileGet(ctx context.Context, req api.AdminAgentProfileGetRequestObject) (api.AdminAgentProfileGetResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_agent_profile_get", func(ctx context.Context, tx *store.Tx, _ time.Time) (api.Profile, error) {
		b, a, err := boxAgent(ctx, tx, req.BoxKey, req.AgentRef)
		if err != nil {
			return api.Profile{}, err
		}
		text, v, err := tx.AgentProfile(ctx, b.ID, a.ID)
		return api.Profile{Text: text, ProfileVersion: dec(v)}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminAgentProfileGet200JSONResponse(out), nil
}

func (s *Service) AdminAgentProfileSet(ctx context.Context, req api.AdminAgentProfileSetRequestObject) (api.AdminAgentProfileSetResponseObject, error) {
	if len(req.Body.Text) > ProfileMaxBytes {
		return nil, apierr.TooLong("text", int64(ProfileMaxBytes))
	}
	out, err := runAdmin(ctx, s, "admin_agent_profile_set", func(ctx context.Context, tx *store.Tx, now time.Time) (api.Profile, error) {
		b, a, err := boxAgent(ctx, tx, req.BoxKey, req.AgentRef)
		if err != nil {
			return api.Profile{}, err
		}
		v, err := tx.SetAgentProfile(ctx, b.ID, a.ID, req.Body.Text)
		return api.Profile{Text: req.Body.Text, ProfileVersion: dec(v)}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminAgentProfileSet200JSONResponse(out), nil
}

func (s *Service) AdminKeyList(ctx context.Context, req api.AdminKeyListRequestObject) (api.AdminKeyListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_key_list", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminKeyList, error) {
		b, a, err := boxAgent(ctx, tx, req.BoxKey, req.AgentRef)
		if err != nil {
			return api.AdminKeyList{}, err
		}
		keys, err := tx.APIKeys(ctx, b.ID, a.ID)
		items := make([]api.AdminKey, 0, len(keys))
		for _, k := range keys {
			items = append(items, adminKey(k))
		}
		return api.AdminKeyList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminKeyList200JSONResponse(out), nil
}

func (s *Service) AdminKeyCreate(ctx context.Context, req api.AdminKeyCreateRequestObject) (api.AdminKeyCreateResponseObject, error) {
	router := req.Body != nil && deref(req.Body.Router)
	apiKey := auth.NewSecret(auth.AgentKeyPrefix)
	out, err := runAdmin(ctx, s, "admin_key_create", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminKeyCreateResult, error) {
		b, a, err := boxAgent(ctx, tx, req.BoxKey, req.AgentRef)
		if err != nil {
			return api.AdminKeyCreateResult{}, err
		}
		k, err := tx.CreateAPIKey(ctx, b.ID, a.ID, auth.HashSecret(apiKey), router, now)
		return api.AdminKeyCreateResult{KeyId: k.ID, ApiKey: apiKey, Router: k.Router}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminKeyCreate200JSONResponse(out), nil
}

func (s *Service) AdminKeyRevoke(ctx context.Context, req api.AdminKeyRevokeRequestObject) (api.AdminKeyRevokeResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_key_revoke", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminKey, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminKey{}, err
		}
		k, err := tx.RevokeAPIKey(ctx, b.ID, req.KeyId, now)
		if err == store.ErrNotFound {
			err = apierr.NotFound().WithField("key_id")
		}
		return adminKey(k), err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminKeyRevoke200JSONResponse(out), nil
}

func (s *Service) AdminSettingsGet(ctx context.Context, req api.AdminSettingsGetRequestObject) (api.AdminSettingsGetResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_settings_get", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminSettings, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminSettings{}, err
		}
		v, err := effectiveSettings(b.Settings)
		return api.AdminSettings{BoxKey: b.Key, SettingsRevision: dec(b.SettingsRevision), Settings: v}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminSettingsGet200JSONResponse(out), nil
}

func (s *Service) AdminSettingsUpdate(ctx context.Context, req api.AdminSettingsUpdateRequestObject) (api.AdminSettingsUpdateResponseObject, error) {
	// A lowered cap's retroactive cleanup may walk a large box: more than store.CallTimeout.
	// Only a patch that names a cap can lower one; any other is bounded as every call is (a
	// stalled database answers it in store.CallTimeout; a failed cleanup it re-runs within
	// that bound is retried by RetryFailedCleanups, which has the long bound).
	if p := req.Body.Settings; p.ChannelMessageCap != nil || p.ChannelAttachmentCap != nil || p.AttachmentMaxBytes != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, capCleanupTimeout)
		defer cancel()
	}
	out, err := runAdmin(ctx, s, "admin_settings_update", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminSettings, error) {
		b, err := box(ctx, tx, req.BoxKey)
		if err != nil {
			return api.AdminSettings{}, err
		}
		overrides, rev, err := tx.LockBoxSettings(ctx, b.ID)
		if err != nil {
			return api.AdminSettings{}, err
		}
		if req.Body.ExpectedRevision != nil {
			expected, err := parseDec("expected_revision", *req.Body.ExpectedRevision)
			if err != nil {
				return api.AdminSettings{}, err
			}
			if expected != rev {
				return api.AdminSettings{}, apierr.Conflict(rev).WithField("expected_revision")
			}
		}
		merged, values, err := mergeSettings(overrides, req.Body.Settings)
		if err != nil {
			return api.AdminSettings{}, err
		}
		newRev, err := tx.SetBoxSettings(ctx, b.ID, merged)
		if err == nil { // lowered retention caps apply retroactively (cleanup.go)
			err = s.cleanupAfterCapChange(ctx, tx, b.ID, overrides, values, now)
		}
		return api.AdminSettings{BoxKey: b.Key, SettingsRevision: dec(newRev), Settings: values}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminSettingsUpdate200JSONResponse(out), nil
}

// capCleanupTimeout bounds a settings update with its retroactive cleanup (cleanup.go).
const capCleanupTimeout = 10 * time.Minute

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func fieldIndex(field string, i int) string {
	return field + "[" + itoa(i) + "]"
}

func (s *Service) AdminTokenCreate(ctx context.Context, req api.AdminTokenCreateRequestObject) (api.AdminTokenCreateResponseObject, error) {
	token := auth.NewSecret(auth.AdminTokenPrefix)
	out, err := runAdmin(ctx, s, "admin_token_create", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminTokenCreateResult, error) {
		label := ""
		if req.Body != nil {
			label = deref(req.Body.Label)
		}
		t, err := tx.CreateAdminToken(ctx, auth.HashSecret(token), label, now)
		return api.AdminTokenCreateResult{TokenId: t.ID, Token: token, Label: t.Label, CreatedAt: t.CreatedAt}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminTokenCreate200JSONResponse(out), nil
}

// AdminTokenList lists the issued admin tokens (never their secrets), so that one whose ID
// was not kept can still be found and revoked.
func (s *Service) AdminTokenList(ctx context.Context, _ api.AdminTokenListRequestObject) (api.AdminTokenListResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_token_list", func(ctx context.Context, tx *store.Tx, _ time.Time) (api.AdminTokenList, error) {
		tokens, err := tx.AdminTokens(ctx)
		items := make([]api.AdminToken, 0, len(tokens))
		for _, t := range tokens {
			items = append(items, api.AdminToken{TokenId: t.ID, Label: t.Label, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt})
		}
		return api.AdminTokenList{Items: items}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminTokenList200JSONResponse(out), nil
}

func (s *Service) AdminTokenRevoke(ctx context.Context, req api.AdminTokenRevokeRequestObject) (api.AdminTokenRevokeResponseObject, error) {
	out, err := runAdmin(ctx, s, "admin_token_revoke", func(ctx context.Context, tx *store.Tx, now time.Time) (api.AdminToken, error) {
		t, err := tx.RevokeAdminToken(ctx, req.TokenId, now)
		if err == store.ErrNotFound {
			err = apierr.NotFound().WithField("token_id")
		}
		return api.AdminToken{TokenId: t.ID, Label: t.Label, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}, err
	})
	if err != nil {
		return nil, err
	}
	return api.AdminTokenRevoke200JSONResponse(out), nil
}
