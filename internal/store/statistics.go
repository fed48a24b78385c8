package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Planner statistics for young tables. A fresh installation's tables are empty when the
// server starts; ANALYZE (or its absence) leaves PostgreSQL planning them as the few pages
// they were, and a prepared statement keeps that plan (a sequential scan of messages inside
// SenderLatest, say) until the table is analyzed again. Autovacuum does so only after 10% of
// the rows changed and at most once a minute: a table growing from 0 to 10,000 rows in
// seconds runs on empty-table plans all that time (the benchmark's first W1 run sent at a
// third of the warm rate). KeepStatistics analyzes any table that changed by more rows than
// it had when last analyzed, so its statistics are never off by more than a factor of two,
// and the ANALYZE invalidates the cached plans. Large tables are left to autovacuum: doubling
// a table of a million rows takes a million changes.

// staleTables are this schema's tables changed, since their last ANALYZE, by more rows than
// they then held (at least minChanges).
const staleTables = `
SELECT quote_ident(s.relname) FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.schemaname = current_schema() AND s.n_mod_since_analyze >= GREATEST($1::bigint, c.reltuples::bigint)`

// statisticsMinChanges keeps tiny tables from being analyzed over and over.
const statisticsMinChanges = 200

// KeepStatistics runs RefreshStatistics every interval until ctx ends. Several server
// processes may run it: ANALYZE (SKIP_LOCKED) skips a table another one is analyzing.
func (s *Store) KeepStatistics(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false // an outage is logged when it begins and when it ends, not every interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := s.RefreshStatistics(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			log.WarnContext(ctx, "refreshing planner statistics failed; retrying quietly until it works", slog.Any("err", err))
		case err == nil && failing:
			log.InfoContext(ctx, "refreshing planner statistics works again")
		}
		failing = err != nil
	}
}

// RefreshStatistics analyzes the tables whose statistics are stale (see above) and returns them.
func (s *Store) RefreshStatistics(ctx context.Context) ([]string, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, staleTables, statisticsMinChanges)
	if err != nil {
		return nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if _, err := s.pool.Exec(ctx, "ANALYZE (SKIP_LOCKED) "+t); err != nil {
			return tables, err
		}
	}
	return tables, nil
}
