package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// Session is a durable agent session.
type Session struct {
	ID                     uuid.UUID
	ObservedProfileVersion int64
	CurrentProfileVersion  int64
	Created                bool
}

// OpenSession creates or resumes the session for (agent, key hash), marking the profile version observed.
func (t *Tx) OpenSession(ctx context.Context, boxID, agentID uuid.UUID, keyHash []byte, profileVersion int64, now time.Time) (Session, error) {
	r, err := t.q.OpenSession(ctx, db.OpenSessionParams{BoxID: boxID, SessionID: uuid.New(), AgentID: agentID,
		SessionKeyHash: keyHash, ObservedProfileVersion: profileVersion, Now: now})
	return Session{ID: r.SessionID, ObservedProfileVersion: r.ObservedProfileVersion, CurrentProfileVersion: profileVersion, Created: r.Created}, err
}

// SessionByKey finds a primed session (ErrNotFound means NOT_PRIMED) together with the box
// settings, and records a coarse last_seen_at observation of the agent.
func (t *Tx) SessionByKey(ctx context.Context, boxID, agentID uuid.UUID, keyHash []byte, now time.Time) (Session, BoxSettings, error) {
	r, err := one(t.q.GetSession(ctx, db.GetSessionParams{BoxID: boxID, AgentID: agentID, SessionKeyHash: keyHash,
		Now: now, StaleBefore: now.Add(-time.Minute)}))
	return Session{ID: r.SessionID, ObservedProfileVersion: r.ObservedProfileVersion, CurrentProfileVersion: r.CurrentProfileVersion},
		BoxSettings{Overrides: r.Settings, Revision: r.SettingsRevision}, err
}

// BoxSettings are a box's settings overrides and revision.
type BoxSettings struct {
	Overrides json.RawMessage
	Revision  int64
}

// ObserveProfile records that the session has seen profile version v.
func (t *Tx) ObserveProfile(ctx context.Context, boxID, sessionID uuid.UUID, v int64) error {
	return t.q.ObserveProfile(ctx, db.ObserveProfileParams{BoxID: boxID, SessionID: sessionID, ProfileVersion: v})
}

// Checkpoint is an agent's saved checkpoint.
type Checkpoint struct {
	Revision         int64
	Body             json.RawMessage
	SavedAt          time.Time
	SavedBySessionID uuid.UUID
}

// Checkpoint reads the checkpoint; ErrNotFound when none was saved.
func (t *Tx) Checkpoint(ctx context.Context, boxID, agentID uuid.UUID) (Checkpoint, error) {
	c, err := one(t.q.GetCheckpoint(ctx, db.GetCheckpointParams{BoxID: boxID, AgentID: agentID}))
	return Checkpoint{Revision: c.Revision, Body: c.Body, SavedAt: c.SavedAt, SavedBySessionID: c.SavedBySessionID}, err
}

// CheckpointRevision is the current revision (0 when none).
func (t *Tx) CheckpointRevision(ctx context.Context, boxID, agentID uuid.UUID) (int64, error) {
	return t.q.CheckpointRevision(ctx, db.CheckpointRevisionParams{BoxID: boxID, AgentID: agentID})
}

// SaveCheckpoint is a compare-and-set on the revision; ok is false when expected is stale.
func (t *Tx) SaveCheckpoint(ctx context.Context, boxID, agentID, sessionID uuid.UUID, expected int64, body json.RawMessage, profileVersion int64, now time.Time) (rev int64, savedAt time.Time, ok bool, err error) {
	if expected == 0 {
		r, err := one(t.q.InsertFirstCheckpoint(ctx, db.InsertFirstCheckpointParams{BoxID: boxID, AgentID: agentID,
			Body: body, Now: now, SessionID: sessionID, ProfileVersion: profileVersion}))
		if err == ErrNotFound {
			return 0, time.Time{}, false, nil
		}
		return r.Revision, r.SavedAt, err == nil, err
	}
	r, err := one(t.q.UpdateCheckpoint(ctx, db.UpdateCheckpointParams{BoxID: boxID, AgentID: agentID, Body: body,
		Now: now, SessionID: sessionID, ProfileVersion: profileVersion, ExpectedRevision: expected}))
	if err == ErrNotFound {
		return 0, time.Time{}, false, nil
	}
	return r.Revision, r.SavedAt, err == nil, err
}

// IdempotencyScope identifies one idempotency key: (box, agent, tool, key).
type IdempotencyScope struct {
	BoxID   uuid.UUID
	AgentID uuid.UUID
	Tool    string
	Key     string
}

// LockIdempotency serializes concurrent calls that share the scope until this transaction ends.
func (t *Tx) LockIdempotency(ctx context.Context, s IdempotencyScope) error {
	return t.q.LockIdempotencyKey(ctx, s.BoxID.String()+"/"+s.AgentID.String()+"/"+s.Tool+"/"+s.Key)
}

// IdempotencyRecord returns the stored request hash and response; ErrNotFound when absent or expired.
func (t *Tx) IdempotencyRecord(ctx context.Context, s IdempotencyScope, now time.Time) (hash, response []byte, err error) {
	r, err := one(t.q.GetIdempotencyRecord(ctx, db.GetIdempotencyRecordParams{BoxID: s.BoxID, AgentID: s.AgentID, Tool: s.Tool, IdemKey: s.Key, Now: now}))
	return r.RequestHash, r.Response, err
}

// PutIdempotencyRecord stores the response for the scope (replacing an expired record).
func (t *Tx) PutIdempotencyRecord(ctx context.Context, s IdempotencyScope, hash, response []byte, now, expires time.Time) error {
	return t.q.PutIdempotencyRecord(ctx, db.PutIdempotencyRecordParams{BoxID: s.BoxID, AgentID: s.AgentID, Tool: s.Tool, IdemKey: s.Key,
		RequestHash: hash, Response: response, Now: now, ExpiresAt: expires})
}

// DeleteExpiredIdempotency removes expired records of a box.
func (t *Tx) DeleteExpiredIdempotency(ctx context.Context, boxID uuid.UUID, now time.Time) (int64, error) {
	return t.q.DeleteExpiredIdempotencyRecords(ctx, db.DeleteExpiredIdempotencyRecordsParams{BoxID: boxID, Now: now})
}
