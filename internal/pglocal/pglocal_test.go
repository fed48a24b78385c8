package pglocal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockedBuffer is a concurrency-safe Options.Log for tests.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dataDir returns a fresh directory the cluster user can reach: as root the
// cluster runs as an unprivileged user, and t.TempDir's parent is 0700.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "data")
}

func startCluster(t *testing.T, ctx context.Context, opts Options) *Cluster {
	t.Helper()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop (cleanup): %v", err)
		}
	})
	return c
}

func queryString(t *testing.T, ctx context.Context, url, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var out string
	if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func TestStartStopReuse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := dataDir(t)
	log := &lockedBuffer{}

	c := startCluster(t, ctx, Options{DataDir: dir, Log: log, Fast: true})
	url := c.URL("agentbox")
	if got := queryString(t, ctx, url, `SELECT 1::text`); got != "1" {
		t.Fatalf("SELECT 1 = %q", got)
	}
	if got := queryString(t, ctx, url, `SHOW listen_addresses`); got != "" {
		t.Fatalf("listen_addresses = %q, want empty (no TCP)", got)
	}
	if got := queryString(t, ctx, url, `SHOW unix_socket_directories`); got != c.socketDir || !strings.HasPrefix(got, socketBase+"/agentbox-") {
		t.Fatalf("unix_socket_directories = %q, want %s (under %s)", got, c.socketDir, socketBase)
	}
	if got := queryString(t, ctx, url, `SHOW fsync`); got != "off" {
		t.Fatalf("fsync = %q with Fast", got)
	}
	if got := queryString(t, ctx, url, `SHOW max_connections`); got != "200" {
		t.Fatalf("max_connections = %q", got)
	}
	if got := queryString(t, ctx, url, `SELECT current_user::text`); got != "agentbox" {
		t.Fatalf("current_user = %q", got)
	}
	// A second owner is refused at once, naming the holder, and the first keeps serving.
	var inUse *InUseError
	if _, err := Start(ctx, Options{DataDir: dir}); !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Fatalf("second Start on a running cluster: err = %v, want InUseError with PID %d", err, os.Getpid())
	}
	if got := queryString(t, ctx, url, `SELECT 2::text`); got != "2" {
		t.Fatalf("first cluster after the refused second Start: SELECT 2 = %q", got)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("connected after Stop")
	}
	if !strings.Contains(log.String(), "database system is ready to accept connections") {
		t.Errorf("server log not forwarded to Options.Log:\n%s", log.String())
	}

	// Reuse: same DataDir, durable settings this time; data survives.
	c2 := startCluster(t, ctx, Options{DataDir: dir})
	if got := queryString(t, ctx, c2.URL("agentbox"), `SHOW fsync`); got != "on" {
		t.Fatalf("fsync = %q without Fast", got)
	}
	if err := c2.Stop(); err != nil {
		t.Fatalf("Stop after reuse: %v", err)
	}
}

// TestStalePIDFile: a postmaster.pid naming a dead process (a crashed run)
// must not prevent a start.
func TestStalePIDFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := dataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pgdata", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c2.URL("agentbox"), `SELECT 1::text`); got != "1" {
		t.Fatalf("SELECT 1 = %q", got)
	}
}

// TestStartFailureShowsServerOutput: when the server cannot start, the error
// carries PostgreSQL's own explanation even though Options.Log is nil.
func TestStartFailureShowsServerOutput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := dataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	conf := filepath.Join(dir, "pgdata", "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("no_such_setting = 1\n")
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctx, Options{DataDir: dir, Fast: true})
	if err == nil || !strings.Contains(err.Error(), "no_such_setting") {
		t.Fatalf("err = %v, want the server's complaint about no_such_setting", err)
	}
	t.Logf("Start failed as expected: %v", err)
}

func TestURLEscapesSocketDir(t *testing.T) {
	c := &Cluster{socketDir: "/tmp/a b&c/run"}
	cfg, err := pgx.ParseConfig(c.URL("my db"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/tmp/a b&c/run" || cfg.Database != "my db" || cfg.User != "agentbox" || cfg.Port != 5432 {
		t.Fatalf("parsed host=%q db=%q user=%q port=%d", cfg.Host, cfg.Database, cfg.User, cfg.Port)
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBinDir(dir); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinDirEnv, t.TempDir())
	if _, err := FindBinDir(); err == nil {
		t.Fatalf("FindBinDir accepted an empty %s", BinDirEnv)
	}
}

func TestVersionOrder(t *testing.T) {
	if !versionLess(versionOf("/usr/lib/postgresql/9.6/bin"), versionOf("/usr/lib/postgresql/15/bin")) {
		t.Fatal("9.6 should sort below 15")
	}
	if versionLess(versionOf("/usr/lib/postgresql/16/bin"), versionOf("/usr/lib/postgresql/15/bin")) {
		t.Fatal("16 should not sort below 15")
	}
}

// TestPreloadLibraries: the option reaches shared_preload_libraries, and a later start
// without it goes back to the server's default (the settings file is rewritten each start).
func TestPreloadLibraries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := dataDir(t)
	c, err := Start(ctx, Options{DataDir: dir, Fast: true, PreloadLibraries: []string{"pg_stat_statements"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	url := c.URL("agentbox")
	if got := queryString(t, ctx, url, `SHOW shared_preload_libraries`); got != "pg_stat_statements" {
		t.Errorf("shared_preload_libraries = %q", got)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	c = startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c.URL("agentbox"), `SHOW shared_preload_libraries`); got != "" {
		t.Errorf("shared_preload_libraries = %q without the option", got)
	}
}
