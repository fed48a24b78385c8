package testdb

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/migrate"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func scan[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func TestServerSelection(t *testing.T) {
	New(t)
	s, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s; template: %s", s.kind, s.template)
	if os.Getenv(EnvURL) == "" && noLocal() && s.cluster == nil {
		t.Fatalf("%s is set but no throwaway cluster was started (server: %s)", EnvNoLocal, s.kind)
	}
}

// TestIsolation: parallel tests each get their own database. All of them
// create the same table; if two shared a database one CREATE would fail or
// a count would be off.
func TestIsolation(t *testing.T) {
	const n = 10
	var mu sync.Mutex
	owner := map[string]int{} // database name -> subtest
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				conn := connect(t, New(t))
				db := scan[string](t, conn, `SELECT current_database()::text`)
				mu.Lock()
				prev, dup := owner[db]
				owner[db] = i
				mu.Unlock()
				if dup {
					t.Fatalf("subtests %d and %d both got database %s", prev, i, db)
				}
				mustExec(t, conn, `CREATE TABLE iso_marker (owner int NOT NULL)`)
				mustExec(t, conn, `INSERT INTO iso_marker VALUES ($1)`, i)
				mustExec(t, conn, fmt.Sprintf(`CREATE TABLE iso_only_%d ()`, i))
				if got := scan[int](t, conn, `SELECT count(*)::int FROM pg_tables WHERE tablename LIKE 'iso\_only\_%'`); got != 1 {
					t.Fatalf("%d iso_only_* tables visible, want only this subtest's", got)
				}
				if got := scan[int](t, conn, `SELECT owner FROM iso_marker`); got != i {
					t.Fatalf("iso_marker owner = %d, want %d", got, i)
				}
			})
		}
	})
	if len(owner) != n {
		t.Fatalf("%d distinct databases for %d subtests", len(owner), n)
	}
}

func TestTableAbsentInOtherDatabase(t *testing.T) {
	a, b := connect(t, New(t)), connect(t, New(t))
	mustExec(t, a, `CREATE TABLE only_in_a (x int)`)
	if got := scan[*string](t, b, `SELECT to_regclass('only_in_a')::text`); got != nil {
		t.Fatalf("table created in one database is visible in another: %s", *got)
	}
	if scan[string](t, a, `SELECT current_database()::text`) == scan[string](t, b, `SELECT current_database()::text`) {
		t.Fatal("two New calls returned the same database")
	}
}

func TestSchemaMigrated(t *testing.T) {
	conn := connect(t, New(t))
	latest, err := migrate.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if got := scan[int](t, conn, `SELECT count(*)::int FROM schema_migrations`); got != latest {
		t.Fatalf("schema_migrations has %d rows, want %d", got, latest)
	}
}

func TestDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		conn := connect(t, New(t))
		name = scan[string](t, conn, `SELECT current_database()::text`)
	})
	s, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	err = s.admin.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestTemplateSealed(t *testing.T) {
	New(t)
	s, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	var isTemplate, allowConn bool
	err = s.admin.QueryRow(context.Background(),
		`SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1`, s.template).Scan(&isTemplate, &allowConn)
	if err != nil {
		t.Fatal(err)
	}
	if !isTemplate || allowConn {
		t.Fatalf("template %s: datistemplate=%v datallowconn=%v, want true/false", s.template, isTemplate, allowConn)
	}
}

// TestTemplateBuildRace: concurrent builders of one template (as several
// test processes would be) all succeed and it is built once, including over
// the remnant of a crashed build.
func TestTemplateBuildRace(t *testing.T) {
	New(t)
	s, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	name, err := randomName()
	if err != nil {
		t.Fatal(err)
	}
	name += "_race"
	ctx := context.Background()
	t.Cleanup(func() {
		for _, sql := range []string{
			fmt.Sprintf("ALTER DATABASE %s WITH IS_TEMPLATE false", ident(name)),
			fmt.Sprintf("DROP DATABASE %s WITH (FORCE)", ident(name)),
		} {
			if _, err := s.admin.Exec(context.Background(), sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	// A remnant: exists but was never sealed.
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.ensureTemplate(ctx, name) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("ensureTemplate: %v", err)
		}
	}
	ready, _, err := s.templateState(ctx, s.admin, name)
	if err != nil || !ready {
		t.Fatalf("template not ready after concurrent builds: ready=%v err=%v", ready, err)
	}
}
