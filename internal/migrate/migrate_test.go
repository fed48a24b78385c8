package migrate_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentbox/agentbox/internal/migrate"
	"github.com/agentbox/agentbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// Several server processes starting at once on an empty database: every one succeeds and
// each migration is applied exactly once.
func TestConcurrentUpAppliesEachMigrationOnce(t *testing.T) {
	url := testdb.NewEmpty(t)
	ctx := context.Background()
	const instances = 8
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			errs[i] = migrate.Up(ctx, pool)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	latest, err := migrate.Latest()
	if err != nil {
		t.Fatal(err)
	}
	var rows, distinct, maxV int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version), max(version) FROM schema_migrations`).Scan(&rows, &distinct, &maxV); err != nil {
		t.Fatal(err)
	}
	if rows != latest || distinct != latest || maxV != latest {
		t.Fatalf("schema_migrations: rows=%d distinct=%d max=%d, want %d", rows, distinct, maxV, latest)
	}
	cur, err := migrate.Current(ctx, pool)
	if err != nil || cur != latest {
		t.Fatalf("Current = %d, %v", cur, err)
	}
	// Running again is a no-op.
	if err := migrate.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationFilesAreContiguous(t *testing.T) {
	ms, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Fatalf("%s has version %d at position %d", m.Name, m.Version, i+1)
		}
	}
}
