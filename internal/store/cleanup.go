package store

import (
	"context"
	"fmt"
	"math"
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

// CleanupTotals are every box's retention figures summed (/metrics).
type CleanupTotals struct {
	Runs, DeletedMessages, Failures int64
	BoxesFailed                     int64     // boxes whose last run failed
	LastSuccess                     time.Time // the newest run of a box whose last run succeeded; zero when none
}

// MetricsTimeout bounds the database read of a /metrics scrape: a scrape answers within it
// even when the database hangs.
const MetricsTimeout = 2 * time.Second

// CleanupTotals sums the cleanup status of every box.
func (s *Store) CleanupTotals(ctx context.Context) (CleanupTotals, error) {
	ctx, cancel := context.WithTimeout(ctx, MetricsTimeout)
	defer cancel()
	r, err := db.New(s.pool).CleanupTotals(ctx)
	if err != nil {
		return CleanupTotals{}, err
	}
	out := CleanupTotals{Runs: r.Runs, DeletedMessages: r.DeletedMessages, Failures: r.Failures, BoxesFailed: r.BoxesFailed}
	if r.LastSuccessUnix > 0 {
		out.LastSuccess = time.UnixMicro(int64(math.Round(r.LastSuccessUnix * 1e6))).UTC()
	}
	return out, nil
}

// RecordCleanupRun counts one retention run that deleted messages. Callers hold the locks of
// the channels they cleaned, so they take the box's status row after them.
func (t *Tx) RecordCleanupRun(ctx context.Context, boxID uuid.UUID, deleted int64, retroactive bool, now time.Time) error {
	return t.q.RecordCleanupRun(ctx, db.RecordCleanupRunParams{BoxID: boxID, Deleted: deleted, Retroactive: retroactive, Now: now})
}

// FailedCleanupBoxes are the boxes whose last retroactive cleanup failed.
func (s *Store) FailedCleanupBoxes(ctx context.Context) ([]uuid.UUID, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return db.New(s.pool).FailedCleanupBoxes(ctx)
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
	t.c.savepoints++
	name := fmt.Sprintf("sp_%d", t.c.savepoints)
	if _, err := t.c.Exec(ctx, "savepoint "+name); err != nil { // begins the transaction if needed
		return err
	}
	queued := len(t.c.atCommit)
	if err := fn(t); err != nil {
		t.c.atCommit = t.c.atCommit[:queued] // rolled back with the rest of fn's writes
		if _, rbErr := t.c.Exec(ctx, "rollback to savepoint "+name); rbErr != nil {
			return rbErr
		}
		return err
	}
	_, err := t.c.Exec(ctx, "release savepoint "+name)
	return err
}
