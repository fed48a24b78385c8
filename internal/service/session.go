package service

import (
	"bytes"
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/agentbox/agentbox/gen/mcp"
	"github.com/agentbox/agentbox/internal/apierr"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/store"
)

// AgentPrime opens or resumes the session the transport names (SPEC §3). Priming again
// returns the same session; priming observes the current profile. It never ACKs.
func (s *Service) AgentPrime(ctx context.Context, req api.AgentPrimeRequestObject) (api.AgentPrimeResponseObject, error) {
	out, err := runUnprimed(ctx, s, "agent_prime", func(ctx context.Context, tx *store.Tx, p auth.Principal) (api.AgentPrimeResult, error) {
		known := int64(-1) // none given
		if req.Body != nil && req.Body.KnownCheckpointRevision != nil {
			v, err := parseDec("known_checkpoint_revision", *req.Body.KnownCheckpointRevision)
			if err != nil {
				return api.AgentPrimeResult{}, err
			}
			known = v
		}
		now := s.clock.Now()
		text, version, err := tx.AgentProfile(ctx, p.BoxID, p.AgentID)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		sess, err := tx.OpenSession(ctx, p.BoxID, p.AgentID, sessionKeyHash(ctx, p), version, now)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		c := &call{p: p, now: now, session: sess}
		bs, err := s.boxSettings(ctx, tx, p)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		c.settings, c.settingsRevision = bs.values, bs.revision
		rev, err := tx.CheckpointRevision(ctx, p.BoxID, p.AgentID)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		rooms, roomsTruncated, err := s.primeRooms(ctx, tx, c)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		counts, err := s.primeCounts(ctx, tx, c)
		if err != nil {
			return api.AgentPrimeResult{}, err
		}
		return api.AgentPrimeResult{
			Agent:          api.PrimeAgent{AgentId: p.AgentID, Name: p.AgentName, BoxKey: p.BoxKey},
			Session:        api.SessionInfo{SessionId: sess.ID, Created: sess.Created},
			Profile:        api.Profile{Text: text, ProfileVersion: dec(version)},
			Checkpoint:     api.CheckpointStatus{Revision: dec(rev), CheckpointChanged: known >= 0 && known != rev},
			Rooms:          rooms,
			RoomsTruncated: roomsTruncated,
			Counts:         counts,
			Limits:         limitsOf(c.settings, c.settingsRevision),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// primeRooms lists the caller's active memberships and pending invitations for agent_prime:
// the first page_limit_max of them by room_id, and whether there are more (room_list pages
// through all).
func (s *Service) primeRooms(ctx context.Context, tx *store.Tx, c *call) (rooms []api.PrimeRoom, truncated bool, err error) {
	rooms, err = firstRooms(ctx, tx, c, c.settings.PageLimitMax+1)
	if int64(len(rooms)) > c.settings.PageLimitMax {
		return rooms[:c.settings.PageLimitMax], true, err
	}
	return rooms, false, err
}

// primeCounts are the live counts of agent_prime: accessible unread attention rows, pending
// incoming requests whose message is still visible, and live leases held by this session.
func (s *Service) primeCounts(ctx context.Context, tx *store.Tx, c *call) (api.PrimeCounts, error) {
	inbox, err := tx.InboxCounts(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, c.now)
	if err != nil {
		return api.PrimeCounts{}, err
	}
	pending, err := tx.PendingIncomingRequests(ctx, c.p.BoxID, c.p.AgentID)
	return api.PrimeCounts{Unread: inbox.Unread, PendingRequests: pending, LeasedBySession: inbox.LeasedBySession}, err
}

// ProfileGet returns the private profile and records that this session observed it.
func (s *Service) ProfileGet(ctx context.Context, req api.ProfileGetRequestObject) (api.ProfileGetResponseObject, error) {
	out, err := runRead(ctx, s, "profile_get", func(ctx context.Context, tx *store.Tx, c *call) (api.Profile, error) {
		text, version, err := tx.AgentProfile(ctx, c.p.BoxID, c.p.AgentID)
		if err != nil {
			return api.Profile{}, err
		}
		if err := tx.ObserveProfile(ctx, c.p.BoxID, c.session.ID, version); err != nil {
			return api.Profile{}, err
		}
		return api.Profile{Text: text, ProfileVersion: dec(version)}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckpointGet reads the agent's checkpoint ("0" and {} when none was saved).
func (s *Service) CheckpointGet(ctx context.Context, req api.CheckpointGetRequestObject) (api.CheckpointGetResponseObject, error) {
	out, err := runRead(ctx, s, "checkpoint_get", func(ctx context.Context, tx *store.Tx, c *call) (api.Checkpoint, error) {
		cp, err := tx.Checkpoint(ctx, c.p.BoxID, c.p.AgentID)
		if err == store.ErrNotFound {
			return api.Checkpoint{Revision: "0", Checkpoint: json.RawMessage(`{}`)}, nil
		}
		if err != nil {
			return api.Checkpoint{}, err
		}
		return api.Checkpoint{Revision: dec(cp.Revision), Checkpoint: cp.Body, SavedAt: &cp.SavedAt, SavedBySessionId: &cp.SavedBySessionID}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckpointSave is a compare-and-set on the checkpoint revision; no merge is attempted.
func (s *Service) CheckpointSave(ctx context.Context, req api.CheckpointSaveRequestObject) (api.CheckpointSaveResponseObject, error) {
	in := req.Body
	// The cap measures the value, not how the client's encoder escaped it (as for payload):
	// compact, each string in its one shortest form (unescapedStrings), which is also what
	// is stored.
	var compact bytes.Buffer
	if err := json.Compact(&compact, in.Checkpoint); err != nil || !utf8.Valid(compact.Bytes()) || loneSurrogate(compact.Bytes()) {
		return nil, apierr.Invalid("checkpoint", "must be a JSON object")
	}
	if shortest, err := unescapedStrings(compact.Bytes()); err != nil {
		return nil, apierr.Invalid("checkpoint", "must be a JSON object")
	} else if len(shortest) != compact.Len() {
		compact.Reset()
		compact.Write(shortest)
	}
	if compact.Len() > CheckpointMaxBytes {
		return nil, apierr.TooLarge("checkpoint", "checkpoint_too_large", int64(CheckpointMaxBytes))
	}
	if _, beyond := scanJSON(compact.Bytes()); beyond {
		return nil, errBeyondFloat64("checkpoint")
	}
	expected, err := parseDec("expected_revision", in.ExpectedRevision)
	if err != nil {
		return nil, err
	}
	m := mutation{op: "checkpoint_save", idempotencyKey: in.IdempotencyKey,
		args: map[string]any{"expected_revision": dec(expected), "checkpoint": json.RawMessage(compact.Bytes())}}
	out, err := runMutation(ctx, s, m, func(ctx context.Context, tx *store.Tx, c *call) (api.CheckpointSaveResult, error) {
		rev, savedAt, ok, err := tx.SaveCheckpoint(ctx, c.p.BoxID, c.p.AgentID, c.session.ID, expected, compact.Bytes(), c.session.CurrentProfileVersion, c.now)
		if err != nil {
			return api.CheckpointSaveResult{}, err
		}
		if !ok {
			cur, err := tx.CheckpointRevision(ctx, c.p.BoxID, c.p.AgentID)
			if err != nil {
				return api.CheckpointSaveResult{}, err
			}
			return api.CheckpointSaveResult{}, apierr.Conflict(cur).WithField("expected_revision")
		}
		return api.CheckpointSaveResult{Revision: dec(rev), SavedAt: savedAt}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MeGet returns who the credential authenticates as (no primed session needed).
func (s *Service) MeGet(ctx context.Context, req api.MeGetRequestObject) (api.MeGetResponseObject, error) {
	out, err := runUnprimed(ctx, s, "me_get", func(ctx context.Context, tx *store.Tx, p auth.Principal) (api.Me, error) {
		a, err := tx.AgentByID(ctx, p.BoxID, p.AgentID)
		if err != nil {
			return api.Me{}, err
		}
		return api.Me{AgentId: a.ID, Name: a.Name, BoxKey: p.BoxKey, HostName: a.HostName, KeyId: p.KeyID,
			Router: p.Router, Listed: a.Listed, Role: &a.Role, Description: &a.Description}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LimitsGet publishes the box's effective limits (no primed session needed).
func (s *Service) LimitsGet(ctx context.Context, req api.LimitsGetRequestObject) (api.LimitsGetResponseObject, error) {
	out, err := runUnprimed(ctx, s, "limits_get", func(ctx context.Context, tx *store.Tx, p auth.Principal) (api.Limits, error) {
		bs, err := s.boxSettings(ctx, tx, p)
		if err != nil {
			return api.Limits{}, err
		}
		return limitsOf(bs.values, bs.revision), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type settingsSnapshot struct {
	values   api.SettingsValues
	revision int64
}

func (s *Service) boxSettings(ctx context.Context, tx *store.Tx, p auth.Principal) (settingsSnapshot, error) {
	b, err := tx.BoxByKey(ctx, p.BoxKey)
	if err != nil {
		return settingsSnapshot{}, err
	}
	v, err := effectiveSettings(b.Settings)
	return settingsSnapshot{values: v, revision: b.SettingsRevision}, err
}

// runUnprimed runs an authenticated agent call that needs no primed session
// (agent_prime itself, /me and /limits).
func runUnprimed[T any](ctx context.Context, s *Service, op string, fn func(context.Context, *store.Tx, auth.Principal) (T, error)) (mcp.Encoded, error) {
	var out mcp.Encoded
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return nil, apierr.Auth()
	}
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		res, err := fn(ctx, tx, p)
		if err != nil {
			return err
		}
		out, err = outputBytes(s, op, res)
		return err
	})
	if err != nil {
		return nil, s.wireError(ctx, op, err)
	}
	return out, nil
}
