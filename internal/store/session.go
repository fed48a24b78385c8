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

// OpenSession creates or resumes the session for (agent, key hash), marking the profile version
// observed, and records a coarse last_seen_at observation of the agent (as SessionByKey).
func (t *Tx) OpenSession(ctx context.Context, boxID, agentID uuid.UUID, keyHash []byte, profileVersion int64, now time.Time) (Session, error) {
	r, err := t.q.OpenSession(ctx, db.OpenSessionParams{BoxID: boxID, SessionID: uuid.New(), AgentID: agentID,
		SessionKeyHash: keyHash, ObservedProfileVersion: profileVersion, Now: now, StaleBefore: now.Add(-time.Minute)})
	return Session{ID: r.SessionID, ObservedProfileVersion: r.ObservedProfileVersion, CurrentProfileVersion: profileVersion, Created: r.Created}, err
}

// SessionByKey finds a primed session (ErrNotFound means NOT_PRIMED) together with the box
// settings, and records a coarse last_seen_at observation of the agent.
func (t *Tx) SessionByKey(ctx context.Context, boxID, agentID uuid.UUID, keyHash []byte, now time.Time) (Session, BoxSettings, error) {
	var r db.GetSessionRow
	var found error
	// A pipeline of one, so that a deferred credential check rides in its round trip.
	err := t.pipeline(ctx, func(q *db.Queries) error {
		r, found = one(q.GetSession(ctx, db.GetSessionParams{BoxID: boxID, AgentID: agentID, SessionKeyHash: keyHash,
			Now: now, StaleBefore: now.Add(-time.Minute)}))
		return notFoundIsNil(found)
	})
	if err == nil {
		err = found
	}
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

// lockKey names the scope's advisory lock, which serializes concurrent calls that share it
// until the transaction ends.
func (s IdempotencyScope) lockKey() string {
	return s.BoxID.String() + "/" + s.AgentID.String() + "/" + s.Tool + "/" + s.Key
}

// MutationStart is what every idempotent mutation reads first.
type MutationStart struct {
	Session Session
	Box     BoxSettings
	Primed  bool // the session exists (else NOT_PRIMED)
	// The live idempotency record of the scope: Found with its request hash, response and
	// when it was written.
	Found           bool
	RecordHash      []byte
	RecordResponse  []byte
	RecordCreatedAt time.Time
}

// StartMutation reads the session (as SessionByKey), takes the scope's idempotency lock
// (serializing calls that share the key until this transaction ends) and reads the scope's
// live record: three statements in one round trip. The record is read by its own statement,
// after the lock is granted, so it sees any call with the same key that committed meanwhile.
func (t *Tx) StartMutation(ctx context.Context, boxID, agentID uuid.UUID, keyHash []byte, s IdempotencyScope, now time.Time) (MutationStart, error) {
	var out MutationStart
	err := t.pipeline(ctx,
		func(q *db.Queries) error {
			r, err := one(q.GetSession(ctx, db.GetSessionParams{BoxID: boxID, AgentID: agentID, SessionKeyHash: keyHash,
				Now: now, StaleBefore: now.Add(-time.Minute)}))
			out.Session = Session{ID: r.SessionID, ObservedProfileVersion: r.ObservedProfileVersion, CurrentProfileVersion: r.CurrentProfileVersion}
			out.Box = BoxSettings{Overrides: r.Settings, Revision: r.SettingsRevision}
			out.Primed = err == nil
			return notFoundIsNil(err)
		},
		func(q *db.Queries) error { return q.LockIdempotencyKey(ctx, s.lockKey()) },
		func(q *db.Queries) error {
			r, err := one(q.GetIdempotencyRecord(ctx, db.GetIdempotencyRecordParams{BoxID: s.BoxID, AgentID: s.AgentID, Tool: s.Tool, IdemKey: s.Key, Now: now}))
			out.Found, out.RecordHash, out.RecordResponse, out.RecordCreatedAt = err == nil, r.RequestHash, r.Response, r.CreatedAt
			return notFoundIsNil(err)
		})
	return out, err
}

// notFoundIsNil is for pipeline steps, where "no row" is an answer, not a failure.
func notFoundIsNil(err error) error {
	if err == ErrNotFound {
		return nil
	}
	return err
}

// IdempotencyRecord reads the scope's live record without taking its lock (a dry run, which
// writes nothing, only says what the real call would meet): found, its request hash and
// when it was written.
func (t *Tx) IdempotencyRecord(ctx context.Context, s IdempotencyScope, now time.Time) (found bool, hash []byte, createdAt time.Time, err error) {
	r, err := one(t.q.GetIdempotencyRecord(ctx, db.GetIdempotencyRecordParams{BoxID: s.BoxID, AgentID: s.AgentID, Tool: s.Tool, IdemKey: s.Key, Now: now}))
	if err == ErrNotFound {
		return false, nil, time.Time{}, nil
	}
	return err == nil, r.RequestHash, r.CreatedAt, err
}

// PutIdempotencyRecord stores the response for the scope (replacing an expired record) as the
// transaction's last statement: it is sent with the COMMIT, in the same round trip, and a
// failure fails the commit. Call it once everything else is written.
func (t *Tx) PutIdempotencyRecord(ctx context.Context, s IdempotencyScope, hash, response []byte, now, expires time.Time) error {
	t.c.atCommit = append(t.c.atCommit, func(q *db.Queries) error {
		return q.PutIdempotencyRecord(ctx, db.PutIdempotencyRecordParams{BoxID: s.BoxID, AgentID: s.AgentID, Tool: s.Tool, IdemKey: s.Key,
			RequestHash: hash, Response: response, Now: now, ExpiresAt: expires})
	})
	return nil
}
