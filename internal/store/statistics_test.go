package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/testdb"
)

// A table that grew past twice its analyzed size is analyzed again (and its cached plans
// with it); one that did not is left alone.
func TestRefreshStatisticsAnalyzesGrownTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil { // every table analyzed empty, as at a first start
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO boxes (box_id, box_key, created_at)
		SELECT gen_random_uuid(), 'grown-' || g, now() FROM generate_series(1, 500) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		analyzed, err := s.RefreshStatistics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(analyzed, "boxes") {
			if slices.Contains(analyzed, "messages") {
				t.Errorf("analyzed an unchanged table: %v", analyzed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxes not analyzed after growing from 0 to 500 rows (analyzed: %v)", analyzed)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the statistics collector's view is polled
	}
	var tuples float64
	if err := conn.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'boxes'::regclass").Scan(&tuples); err != nil {
		t.Fatal(err)
	}
	if tuples < 500 {
		t.Errorf("boxes reltuples %v after refresh, want ≥ 500", tuples)
	}
	// Analyzed at its size, it is not stale again until it doubles.
	analyzed, err := s.RefreshStatistics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(analyzed, "boxes") {
		t.Errorf("boxes analyzed again without changes")
	}
}
