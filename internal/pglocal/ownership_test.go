package pglocal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestLongDataDir: a data directory deeper than a unix socket address allows
// works, because the socket lives in a short directory of its own.
func TestLongDataDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(dataDir(t), strings.Repeat("x", 120))
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c.URL("agentbox"), `SELECT 1::text`); got != "1" {
		t.Fatalf("SELECT 1 = %q", got)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.socketDir); !os.IsNotExist(err) {
		t.Fatalf("socket directory %s left after Stop (stat: %v)", c.socketDir, err)
	}
}

// TestFailedStartRemovesNewDataDir: a Start that fails leaves no directory it created.
func TestFailedStartRemovesNewDataDir(t *testing.T) {
	dir := dataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, Options{DataDir: dir, Fast: true}); err == nil {
		t.Fatal("Start with a cancelled context succeeded")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("failed Start left %s (stat: %v)", dir, err)
	}
}

// TestLeftoverServerIsStopped: a postmaster still running on a data directory
// nobody owns (its owner died; here started by pg_ctl, detached from us, as an
// earlier version did) is recognised as this cluster's and stopped by the
// next Start, which then serves the same data.
func TestLeftoverServerIsStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := dataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	execSQL(t, ctx, c.URL("agentbox"), `CREATE TABLE kept ()`)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// The stranded server: pg_ctl daemonizes it, so it is not our child.
	if err := os.Mkdir(c.socketDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := c.user.chownTree(c.socketDir); err != nil {
		t.Fatal(err)
	}
	stray := c.command(ctx, "pg_ctl", "start", "-D", c.pgData, "-w", "-l", filepath.Join(c.pgData, "stray.log"))
	if out, err := stray.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	pid, err := c.postmasterPID()
	if err != nil || pid == 0 || c.processOf(pid) != procCluster {
		t.Fatalf("stray postmaster: pid %d, err %v", pid, err)
	}

	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if err := syscall.Kill(pid, 0); err == nil && c.processOf(pid) == procCluster {
		t.Fatalf("the stranded postmaster (PID %d) still runs", pid)
	}
	if c2.postmaster.Pid == pid {
		t.Fatal("the new cluster reuses the old postmaster")
	}
	if got := queryString(t, ctx, c2.URL("agentbox"), `SELECT to_regclass('kept')::text`); got != "kept" {
		t.Fatalf("data lost across the restart: %q", got)
	}
}

// TestPIDFileOfAnotherProcess: a postmaster.pid naming a live process that is
// not this cluster's postmaster (a reused PID) does not block the start, and
// that process is not signalled.
func TestPIDFileOfAnotherProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := dataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "120")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() }) //nolint:errcheck
	pidFile := filepath.Join(c.pgData, "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c2.URL("agentbox"), `SELECT 1::text`); got != "1" {
		t.Fatalf("SELECT 1 = %q", got)
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Fatalf("the unrelated process is gone: %v", err)
	}
}

// TestUnreachableDataDir: as root the cluster runs unprivileged; a DataDir
// that user cannot reach (below a root-only directory, like /root) works
// without any permission being changed: the cluster lives in a state
// directory of its own and is found there again at the next start.
func TestUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root switches to an unprivileged cluster user")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	private, dir := unreachableDataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if !strings.HasPrefix(c.PGData(), stateRoot+"/") {
		t.Fatalf("cluster in %s, want it under %s", c.PGData(), stateRoot)
	}
	execSQL(t, ctx, c.URL("agentbox"), `CREATE TABLE kept ()`)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: mode %v (err %v), want it left at 0700", private, fi.Mode(), err)
	}
	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c2.URL("agentbox"), `SELECT to_regclass('kept')::text`); got != "kept" {
		t.Fatalf("the cluster was not found again: %q", got)
	}
}

// TestDeletedDataDirStartsEmpty: as root, with the cluster in the state directory (see
// TestUnreachableDataDir), deleting the data directory starts a new, empty installation at
// the same path, as it does where the cluster lives inside it; the old cluster is moved
// aside, not reused and not deleted.
func TestDeletedDataDirStartsEmpty(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root switches to an unprivileged cluster user")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, dir := unreachableDataDir(t)
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	execSQL(t, ctx, c.URL("agentbox"), `CREATE TABLE kept ()`)
	old := c.PGData()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	if got := queryString(t, ctx, c2.URL("agentbox"), `SELECT coalesce(to_regclass('kept')::text, 'none')`); got != "none" {
		t.Fatalf("the new data directory got the deleted one's cluster (table %q)", got)
	}
	aside := c2.SetAside()
	if aside == "" || c2.PGData() != old {
		t.Fatalf("set aside at %q, new cluster at %s (old %s)", aside, c2.PGData(), old)
	}
	if _, err := os.Stat(filepath.Join(aside, "pgdata", "PG_VERSION")); err != nil {
		t.Fatalf("the old cluster was not kept: %v", err)
	}
	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	c3 := startCluster(t, ctx, Options{DataDir: dir, Fast: true}) // the same data directory again: its own cluster, nothing set aside
	if c3.SetAside() != "" {
		t.Fatalf("a restart set aside %s", c3.SetAside())
	}
}

// unreachableDataDir is a data directory below a root-only directory (private), with the
// state directory moved into the test's own.
func unreachableDataDir(t *testing.T) (private, dir string) {
	t.Helper()
	oldRoot := stateRoot
	stateRoot = filepath.Join(filepath.Dir(dataDir(t)), "state")
	t.Cleanup(func() { stateRoot = oldRoot })
	private = filepath.Dir(dataDir(t))
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	return private, filepath.Join(private, "data")
}

func execSQL(t *testing.T, ctx context.Context, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestClusterUserOwnsOnlyPGData: as root the cluster runs as an unprivileged user, which
// gets pgdata and nothing else of the data directory: the server's files there (the admin
// token, key files, uploads) stay root's and unreadable by it, at the first start and the
// next, and what an earlier version handed over whole is taken back.
func TestClusterUserOwnsOnlyPGData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root switches to an unprivileged cluster user")
	}
	u, err := clusterUser()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := dataDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "uploads"), 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner := func(path string) uint32 {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	check := func(when string, c *Cluster) {
		t.Helper()
		for _, p := range []string{dir, secret, filepath.Join(dir, "uploads")} {
			if got := owner(p); got == u.uid {
				t.Errorf("%s: %s belongs to the cluster user %s", when, p, u.name)
			}
		}
		if got := owner(c.PGData()); got != u.uid {
			t.Errorf("%s: pgdata belongs to uid %d, want the cluster user's %d", when, got, u.uid)
		}
		// The cluster user cannot read the secret (run as that user, as PostgreSQL runs).
		cat := exec.Command("cat", secret)
		u.applyTo(cat)
		if out, err := cat.CombinedOutput(); err == nil || strings.Contains(string(out), "secret") {
			t.Errorf("%s: the cluster user reads %s: %q", when, secret, out)
		}
		if got := queryString(t, ctx, c.URL("agentbox"), `SELECT 1::text`); got != "1" {
			t.Errorf("%s: SELECT 1 = %q", when, got)
		}
	}
	c := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	check("first start", c)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// As an earlier version left it: everything the cluster user's.
	if err := u.chownTree(dir); err != nil {
		t.Fatal(err)
	}
	c2 := startCluster(t, ctx, Options{DataDir: dir, Fast: true})
	check("after an earlier version's start", c2)
}
