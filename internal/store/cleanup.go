package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/gen/db"
)

// CleanupStatus is a box's retention cleanup health (SPEC §11).
type CleanupStatus struct {
	State           string // idle | running | failed
	Runs            int64
	DeletedMessages int64
	Failures        int64
	LastRunAt       *time.Time
	LastError       *string
}

// CleanupStatus reads a box's cleanup status (idle with zero counts before any run).
func (t *Tx) CleanupStatus(ctx context.Context, boxID uuid.UUID) (CleanupStatus, error) {
	r, err := one(t.q.GetCleanupStatus(ctx, boxID))
	if err == ErrNotFound {
		return CleanupStatus{State: "idle"}, nil
	}
	return CleanupStatus{State: r.State, Runs: r.Runs, DeletedMessages: r.DeletedMessages, Failures: r.Failures,
		LastRunAt: r.LastRunAt, LastError: r.LastError}, err
}

// RecordCleanupRun counts one retention run that deleted messages. Callers hold the locks of
// the channels they cleaned, so they take the box's status row after them.
func (t *Tx) RecordCleanupRun(ctx context.Context, boxID uuid.UUID, deleted int64, now time.Time) error {
	return t.q.RecordCleanupRun(ctx, db.RecordCleanupRunParams{BoxID: boxID, Deleted: deleted, Now: now})
}

// RecordCleanupFailure counts a failed cleanup run with a short, content-free description.
func (t *Tx) RecordCleanupFailure(ctx context.Context, boxID uuid.UUID, lastError string, now time.Time) error {
	return t.q.RecordCleanupFailure(ctx, db.RecordCleanupFailureParams{BoxID: boxID, LastError: lastError, Now: now})
}

// LockBoxChannels locks the next max channels of the box after the given channel_id, in
// channel_id order (the order sends lock channels in), until commit.
func (t *Tx) LockBoxChannels(ctx context.Context, boxID, after uuid.UUID, max int32) ([]uuid.UUID, error) {
	return t.q.LockBoxChannels(ctx, db.LockBoxChannelsParams{BoxID: boxID, AfterChannelID: after, MaxRows: max})
}

// Savepoint runs fn in a nested transaction: when fn fails, its writes are rolled back and the
// outer transaction continues.
func (t *Tx) Savepoint(ctx context.Context, fn func(*Tx) error) error {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(&Tx{tx: sp, q: db.New(sp)}); err != nil {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return rbErr
		}
		return err
	}
	return sp.Commit(ctx)
}
