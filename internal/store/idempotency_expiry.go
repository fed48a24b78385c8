package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbox/agentbox/gen/db"
)

// Expired idempotency records (SPEC §10: kept for idempotency_retention_seconds). A call
// already ignores a record past its expires_at (GetIdempotencyRecord) and replaces it, so
// deleting one changes no answer; the sweeper keeps the table from growing by a row for every
// mutation ever made. Every server process sweeps: box by box, a bounded batch per statement,
// each its own short transaction under the call timeout, so no statement holds many row locks
// or runs long. Batches skip the rows another process's batch holds (SKIP LOCKED in
// idempotency_delete_expired, 0023_idempotency_expiry.sql), so concurrent sweepers split a
// backlog between them, never wait for each other and never delete a record twice. No
// session-level lock: it would not survive a transaction-mode pooler (PgBouncer).

// IdempotencyExpiryInterval is how often a server sweeps expired idempotency records.
const IdempotencyExpiryInterval = time.Minute

const (
	expiryBatchRows = 1000 // records deleted per statement
	expiryBoxPage   = 1000 // boxes read per statement
)

// ExpiryStats are this process's sweeper figures since it started (/metrics).
type ExpiryStats struct {
	Runs, Failures, Deleted int64
	LastSuccess             time.Time // the `now` of the last run that finished without error; zero before
}

// expirySweeper is a Store's sweeper state.
type expirySweeper struct {
	batch, boxPage int32 // 0: expiryBatchRows, expiryBoxPage (tests set smaller ones)
	mu             sync.Mutex
	stats          ExpiryStats
}

// KeepIdempotencyExpiry runs SweepExpiredIdempotency every interval, with now() as the
// current time, until ctx ends. An outage is logged when it begins and when it ends, not at
// every interval.
func (s *Store) KeepIdempotencyExpiry(ctx context.Context, interval time.Duration, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := s.SweepExpiredIdempotency(ctx, now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			log.WarnContext(ctx, "deleting expired idempotency records failed; retrying quietly every interval until it works",
				slog.String("cause", FailureCause(err)), slog.Duration("interval", interval))
		case err == nil && failing:
			log.InfoContext(ctx, "deleting expired idempotency records works again")
		}
		failing = err != nil
	}
}

// SweepExpiredIdempotency deletes every box's records expired at now and returns how many it
// deleted (some may have been when it fails). It stops at the first failure: the next run
// starts over, and the batches already committed stay deleted.
func (s *Store) SweepExpiredIdempotency(ctx context.Context, now time.Time) (int64, error) {
	deleted, err := s.sweepExpired(ctx, now)
	e := &s.expiry
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Deleted += deleted
	switch {
	case err == nil:
		e.stats.Runs++
		e.stats.LastSuccess = now
	case ctx.Err() == nil: // a run cut short by the server stopping is no failure
		e.stats.Runs++
		e.stats.Failures++
	}
	return deleted, err
}

// IdempotencyExpiryStats reports this process's sweeper figures.
func (s *Store) IdempotencyExpiryStats() ExpiryStats {
	s.expiry.mu.Lock()
	defer s.expiry.mu.Unlock()
	return s.expiry.stats
}

func (s *Store) sweepExpired(ctx context.Context, now time.Time) (int64, error) {
	batch, page := s.expiry.batch, s.expiry.boxPage
	if batch == 0 {
		batch = expiryBatchRows
	}
	if page == 0 {
		page = expiryBoxPage
	}
	q := db.New(s.pool)
	var deleted int64
	for after := uuid.Nil; ; {
		boxes, err := boundedCall(s, ctx, func(ctx context.Context) ([]uuid.UUID, error) {
			return q.ExpiryBoxes(ctx, db.ExpiryBoxesParams{After: after, MaxRows: page})
		})
		if err != nil {
			return deleted, err
		}
		for _, box := range boxes {
			for { // a short batch means the box has no more expired records (or another sweeper holds them)
				n, err := boundedCall(s, ctx, func(ctx context.Context) (int64, error) {
					return q.DeleteExpiredIdempotencyRecords(ctx, db.DeleteExpiredIdempotencyRecordsParams{BoxID: box, Now: now, MaxRows: batch})
				})
				deleted += n
				if err != nil {
					return deleted, err
				}
				if n < int64(batch) {
					break
				}
			}
		}
		if len(boxes) < int(page) {
			return deleted, nil
		}
		after = boxes[len(boxes)-1]
	}
}

// boundedCall runs one statement under the store's call timeout.
func boundedCall[T any](s *Store, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	return fn(ctx)
}

// FailureCause describes a failed statement without its text, which may quote values:
// whether the database was reachable, else the SQLSTATE it answered (logs, and what an admin
// reads of a failed cleanup).
func FailureCause(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case connectionLost(err):
		return "database unreachable, connection lost or call timed out"
	case errors.As(err, &pgErr):
		return "database error SQLSTATE " + pgErr.Code
	}
	return "unexpected error"
}
