// Package testdb gives every test its own fully migrated PostgreSQL database.
//
//	func TestSomething(t *testing.T) {
//		url := testdb.New(t) // dropped when the test ends
//		...
//	}
//
// The server is chosen once per test process:
//
//  1. $AGENTBOX_TEST_DATABASE_URL, a postgres:// URL to a database on a server
//     where the user may CREATE DATABASE;
//  2. else postgres://postgres@127.0.0.1:5432/postgres if it answers within
//     2 s (skipped when $AGENTBOX_TEST_NO_LOCAL is set to anything but "" or "0");
//  3. else a throwaway cluster (internal/pglocal, Fast) in a new temporary
//     directory, private to this test process.
//
// A package whose tests may use the throwaway cluster should stop it at the
// end of the run:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// Without that (or if the process crashes or is killed), a small watchdog
// process started next to the cluster stops it and removes its directory once
// the test process has exited.
//
// Databases are cloned from a template, agentbox_tmpl_<migrate.Fingerprint()>,
// that is built once per schema version and server (serialized across test
// processes with an advisory lock) and then kept; templates of older schema
// versions are left alone. Databases of a test process that crashed before
// its cleanups ran are left behind on servers 1 and 2, named agentbox_t_<hex>.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbox/agentbox/internal/schema"
)

const (
	// EnvURL names a server to use instead of the defaults.
	EnvURL = "AGENTBOX_TEST_DATABASE_URL"
	// EnvNoLocal skips probing the PostgreSQL on 127.0.0.1:5432.
	EnvNoLocal = "AGENTBOX_TEST_NO_LOCAL"

	cloneTimeout = time.Minute
	dropTimeout  = 30 * time.Second
	// Concurrent clones may briefly see the template "being accessed by
	// other users"; retries back off between these bounds until cloneTimeout.
	cloneBackoffMin = 20 * time.Millisecond
	cloneBackoffMax = 500 * time.Millisecond
)

var (
	setupOnce sync.Once
	shared    *server
	setupErr  error
)

// New returns a pgx URL to a fresh, fully migrated database that belongs to
// this test only; it is dropped (WITH (FORCE)) when the test ends. Safe for
// t.Parallel() and for many test processes at once. If no server can be
// found or started, the test fails with the reason (it is never skipped).
func New(t testing.TB) string {
	t.Helper()
	return newDatabase(t, func(s *server, ctx context.Context, name string) error { return s.clone(ctx, name) })
}

// NewEmpty is New without the schema: an empty database (for migration tests).
func NewEmpty(t testing.TB) string {
	t.Helper()
	return newDatabase(t, func(s *server, ctx context.Context, name string) error {
		_, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident(name))
		return err
	})
}

// NewEmptyCLocale is NewEmpty with the C locale for collation and character classes, as the
// embedded cluster's databases have (initdb --locale=C), whatever the server's default.
func NewEmptyCLocale(t testing.TB) string {
	t.Helper()
	return newDatabase(t, func(s *server, ctx context.Context, name string) error {
		_, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
		return err
	})
}

// newDatabase creates a database for this test only with create and drops it (WITH
// (FORCE)) when the test ends.
func newDatabase(t testing.TB, create func(s *server, ctx context.Context, name string) error) string {
	t.Helper()
	s, err := sharedServer()
	if err != nil {
		t.Fatalf("testdb: no PostgreSQL server for tests: %v", err)
	}
	name, err := randomName()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cloneTimeout)
	defer cancel()
	if err := create(s, ctx, name); err != nil {
		t.Fatalf("testdb: creating database %s (%s): %v", name, s.kind, err)
	}
	t.Cleanup(func() {
		if err := s.drop(name); err != nil {
			t.Errorf("testdb: dropping database %s: %v", name, err)
		}
	})
	return s.urlFor(name)
}

// Main runs the tests, then stops the throwaway cluster if this process
// started one, and exits. Call it from TestMain.
func Main(m *testing.M) { MainWith(m) }

// MainWith is Main with clean-ups run after the tests, before the exit.
func MainWith(m *testing.M, cleanups ...func()) {
	schema.SetCrossCheck(true) // every document a test validates also checks the fast path
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: shutting down the test database server: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func sharedServer() (*server, error) {
	setupOnce.Do(func() { shared, setupErr = setup() })
	return shared, setupErr
}

func shutdown() error {
	// An empty Do orders this read after any setup and keeps a late New
	// from starting a server nobody would stop.
	setupOnce.Do(func() {})
	if shared == nil {
		return nil
	}
	return shared.shutdown()
}

// clone creates database name from the template, retrying while concurrent
// clones hold the template (SQLSTATE 55006, object_in_use).
func (s *server) clone(ctx context.Context, name string) error {
	stmt := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", ident(name), ident(s.template))
	backoff := cloneBackoffMin
	for {
		_, err := s.admin.Exec(ctx, stmt)
		if !isObjectInUse(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cloneBackoffMax)
	}
}

// drop removes database name, disconnecting whatever the test left open.
// It runs in t.Cleanup, after the test's context is cancelled, so it uses
// its own.
func (s *server) drop(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	_, err := s.admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", ident(name)))
	return err
}

func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

func randomName() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random database name: %w", err)
	}
	return "agentbox_t_" + hex.EncodeToString(b), nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
