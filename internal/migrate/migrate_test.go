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
	pool := openPool(t, url)
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

// An existing installation upgraded to the unread counters (0015_inbox_counts.sql) gets them
// from the attention rows it holds: delivered is every row, acked the acknowledged ones.
func TestInboxCountersBackfill(t *testing.T) {
	url := testdb.NewEmpty(t)
	ctx := context.Background()
	pool := openPool(t, url)
	applyBefore(t, pool, 15)
	// Agent 1: 3 rows in channel A (1 acked), 2 in channel B (both acked); agent 2: 1 in A.
	if _, err := pool.Exec(ctx, `
		INSERT INTO boxes (box_id, box_key, created_at) VALUES ('00000000-0000-0000-0000-00000000000b', 'b', now());
		INSERT INTO attention (box_id, agent_id, inbox_seq, message_id, channel_id, reasons, acked_at)
		SELECT '00000000-0000-0000-0000-00000000000b', ('00000000-0000-0000-0000-00000000000' || agent)::uuid, seq,
		       gen_random_uuid(), ('00000000-0000-0000-0000-0000000000' || channel)::uuid, 1, CASE WHEN acked THEN now() END
		FROM (VALUES (1, 1, 'aa', false), (1, 2, 'aa', true), (1, 3, 'aa', false), (1, 4, 'bb', true), (1, 5, 'bb', true),
		             (2, 6, 'aa', false)) AS v(agent, seq, channel, acked)`); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `
		SELECT string_agg(right(d.agent_id::text, 1) || ':' || right(d.channel_id::text, 2) || '=' || d.n || '/' || COALESCE(k.n, 0), ' '
		                  ORDER BY d.agent_id, d.channel_id)
		FROM inbox_delivered d LEFT JOIN (SELECT box_id, agent_id, channel_id, sum(n) AS n FROM inbox_acked GROUP BY 1, 2, 3) k
		USING (box_id, agent_id, channel_id)`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "1:aa=3/1 1:bb=2/2 2:aa=1/0"; got != want {
		t.Fatalf("counters (delivered/acked) %q, want %q", got, want)
	}
}

// An installation upgraded to per-box sequences (0025_box_sequences.sql) keeps every stream
// increasing: each existing box continues above every value the shared sequences handed out,
// a box created afterwards starts at 1, and the upper bound of an inbox is its box's.
func TestBoxSequencesContinueAboveTheSharedOnes(t *testing.T) {
	url := testdb.NewEmpty(t)
	ctx := context.Background()
	pool := openPool(t, url)
	applyBefore(t, pool, 25)
	// Two boxes drew from the shared sequences before the upgrade.
	if _, err := pool.Exec(ctx, `
		INSERT INTO boxes (box_id, box_key, created_at) VALUES ('00000000-0000-0000-0000-0000000000b1', 'b1', now()),
		                                                       ('00000000-0000-0000-0000-0000000000b2', 'b2', now());
		SELECT setval('message_seq_seq', 41), setval('inbox_seq_seq', 77)`); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO boxes (box_id, box_key, created_at) VALUES ('00000000-0000-0000-0000-0000000000b3', 'b3', now())`); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `
		SELECT string_agg(box_key || ': upper ' || inbox_upper(box_id, box_id) || ', next ' || nextval(box_message_seq(box_id)) || '/' || nextval(box_inbox_seq(box_id)), '; ' ORDER BY box_key)
		FROM boxes`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "b1: upper 77, next 42/78; b2: upper 77, next 42/78; b3: upper 0, next 1/1"; got != want {
		t.Fatalf("after the upgrade: %q, want %q", got, want)
	}
	var shared int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_sequences WHERE sequencename IN ('message_seq_seq', 'inbox_seq_seq')`).Scan(&shared); err != nil || shared != 0 {
		t.Fatalf("the shared sequences are still there: %d %v", shared, err)
	}
}

// A schema newer than the binary (a newer binary migrated it) is reported with both versions,
// and Up leaves it as it is.
func TestAheadOfTheBinary(t *testing.T) {
	url := testdb.New(t)
	ctx := context.Background()
	pool := openPool(t, url)
	latest, err := migrate.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if applied, known, ahead, err := migrate.Ahead(ctx, pool); err != nil || applied != latest || known != latest || ahead {
		t.Fatalf("current schema: Ahead = %d, %d, %v, %v", applied, known, ahead, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_a_newer_binary.sql')`, latest+1); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Up(ctx, pool); err != nil {
		t.Fatalf("Up on a newer schema: %v", err)
	}
	if applied, known, ahead, err := migrate.Ahead(ctx, pool); err != nil || applied != latest+1 || known != latest || !ahead {
		t.Fatalf("newer schema: Ahead = %d, %d, %v, %v; want %d, %d, true", applied, known, ahead, err, latest+1, latest)
	}
}

// applyBefore applies the migrations below version, as an installation of that time had them.
func applyBefore(t *testing.T, pool *pgxpool.Pool, version int) {
	t.Helper()
	ctx := context.Background()
	ms, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		if _, err := pool.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// openPool is a pool on url, closed when the test ends.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
