// Package pglocal runs a private PostgreSQL cluster with the machine's own
// PostgreSQL binaries: it is the embedded default of `agentbox serve` and the
// fallback server of the test harness.
//
// Layout:
//
//	DataDir/owner.lock    held (flock) by the owning process for its whole life
//	DataDir/pgdata/       the cluster (initdb on first start, reused afterwards)
//	pgdata/agentbox.conf  settings rewritten on every start (included from postgresql.conf)
//	/tmp/agentbox-<hash>/ the unix socket directory (mode 0700, owned by the cluster user)
//
// One process owns a data directory at a time: Start takes DataDir/owner.lock
// without waiting, and a second Start on the same directory fails at once
// (InUseError, with the holder's PID) before touching anything. Because the
// kernel drops the lock when its holder dies, a postmaster found running on a
// directory whose lock we just took was left by an owner that died: Start
// stops it (it is verified to be this cluster's postmaster) and starts afresh.
//
// The postmaster is our child, started with a parent-death signal (SIGINT,
// PostgreSQL's fast shutdown): however the owning process ends (a signal it
// does not handle, a panic, SIGKILL), the cluster shuts itself down.
//
// The server listens only on its unix socket (listen_addresses is empty), so it
// never collides with another PostgreSQL on the machine, and only the
// cluster's OS user (and root) can reach it. Authentication is "trust" for the
// superuser "agentbox": the 0700 socket directory is the access boundary. The
// socket lives in a short directory of its own under /tmp, because unix socket
// addresses are limited to 107 bytes and DataDir may be deep.
//
// initdb and postgres refuse to run as root. When the caller is root they run
// as the "postgres" system user, or "nobody" if that does not exist, and the
// cluster's directory is chowned to that user. If that user cannot reach
// DataDir (e.g. it is under /root, mode 0700), the cluster is kept in a state
// directory of its own instead, /var/lib/agentbox/clusters/<hash of DataDir>;
// the lock stays in DataDir.
package pglocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// superuser is the role initdb creates; clients connect as it.
	superuser = "agentbox"
	// defaultDatabase is created after the first start for the application.
	defaultDatabase = "agentbox"
	// port only names the socket file (.s.PGSQL.<port>); no TCP port is opened,
	// and the socket directory is private, so the default cannot collide.
	port = 5432
	// startTimeout bounds waiting for the server to accept connections, and
	// stopTimeout a fast shutdown before it is escalated.
	startTimeout = 60 * time.Second
	stopTimeout  = 60 * time.Second
	// confFile holds the settings Start controls; rewritten on every start.
	confFile = "agentbox.conf"
	// socketBase holds the socket directories: short, and traversable by every user.
	socketBase = "/tmp"
	// pollInterval paces the polls for the server's readiness and exit.
	pollInterval = 20 * time.Millisecond
)

// stateRoot holds the clusters of data directories the cluster user cannot
// reach (root only); a variable so tests can move it.
var stateRoot = "/var/lib/agentbox/clusters"

// Options configures Start.
type Options struct {
	// DataDir holds the lock and, when the cluster user can reach it, the
	// cluster (DataDir/pgdata); created if missing.
	DataDir string
	// Log receives initdb and server output (nil = discard). It must not block
	// for long: the server stalls while its log pipe is full.
	Log io.Writer
	// Fast trades durability for speed (fsync, synchronous_commit and
	// full_page_writes off; initdb --no-sync). For tests only: a machine crash
	// can corrupt the cluster.
	Fast bool
	// PreloadLibraries go into shared_preload_libraries (e.g. pg_stat_statements for
	// the benchmark's statement statistics); empty leaves the server's default, which
	// is what `serve` uses.
	PreloadLibraries []string
	// NewDataDir says the caller created DataDir just now (Start knows when it creates it
	// itself). A new DataDir is a new installation: a cluster the state directory still holds
	// for its path belonged to a deleted one and is set aside (see placeCluster).
	NewDataDir bool
}

// Cluster is a running server started by Start.
type Cluster struct {
	binDir      string
	dataDir     string
	clusterRoot string // the directory holding pgdata: DataDir, or a state directory
	pgData      string
	socketDir   string
	user        *osUser // nil: processes run as the current user
	out         *outputSink
	lock        *dirLock
	preload     []string // Options.PreloadLibraries
	newDataDir  bool     // Options.NewDataDir, or Start created DataDir
	setAside    string   // where placeCluster moved a deleted DataDir's cluster ("" none)
	leftover    int      // PID of the postmaster a dead owner left running, stopped by Start (0 none)

	postmaster *os.Process
	exited     chan struct{} // closed once the postmaster has exited and been reaped
	exitErr    error         // its exit status; read only after exited is closed

	stopOnce sync.Once
	stopErr  error
}

// Start takes the data directory's lock, initializes a cluster when there is
// none, starts it, waits until it accepts connections and creates the
// "agentbox" database if missing. An existing cluster is reused. A data
// directory owned by another live process fails with *InUseError; a server
// left running by a dead owner is stopped first. A failed Start leaves
// nothing running and removes the directories it created.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	created, err := c.makeDataDir()
	if err != nil {
		return nil, err
	}
	c.newDataDir = created || opts.NewDataDir
	if c.lock, err = lockDataDir(c.dataDir); err != nil {
		if created {
			os.RemoveAll(c.dataDir) //nolint:errcheck // best effort: only what we just made
		}
		return nil, err
	}
	var createdRoot bool
	if err := c.startup(ctx, opts.Fast, &createdRoot); err != nil {
		c.removeSocketDir()
		c.lock.release()
		if createdRoot && c.clusterRoot != c.dataDir {
			os.RemoveAll(c.clusterRoot) //nolint:errcheck
		}
		if created {
			os.RemoveAll(c.dataDir) //nolint:errcheck
		}
		return nil, errors.Join(err, c.out.Err())
	}
	return c, nil
}

func (c *Cluster) startup(ctx context.Context, fast bool, createdRoot *bool) error {
	var err error
	if *createdRoot, err = c.placeCluster(); err != nil {
		return err
	}
	if err := c.stopLeftover(); err != nil {
		return err
	}
	if err := c.giveClusterUserPGData(); err != nil {
		return err
	}
	if err := c.initIfNeeded(ctx, fast); err != nil {
		return err
	}
	if err := c.prepareSocketDir(); err != nil {
		return err
	}
	if err := c.configure(fast); err != nil {
		return err
	}
	// configure wrote its file as us.
	if err := c.user.chownTree(c.pgData); err != nil {
		return err
	}
	if err := c.launch(ctx); err != nil {
		return err
	}
	if err := c.ensureDatabase(ctx, defaultDatabase); err != nil {
		return errors.Join(err, c.stopPostmaster())
	}
	return nil
}

// URL returns a pgx/libpq URL for database over the cluster's unix socket.
// The port is explicit so a PGPORT in the environment cannot redirect it.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		superuser, url.PathEscape(database), queryEscape(c.socketDir), port)
}

// Exited is closed when the running postmaster exits, for whatever reason (Stop, a crash, a
// signal from outside); ExitErr then says how. After Restart, the new postmaster's.
func (c *Cluster) Exited() <-chan struct{} { return c.exited }

// ExitErr is the postmaster's exit status; call it only after Exited is closed.
func (c *Cluster) ExitErr() error { return c.exitErr }

// PGData is the cluster's directory (DataDir/pgdata, or the state directory's).
func (c *Cluster) PGData() string { return c.pgData }

// Stop shuts the server down (fast shutdown: clients are disconnected, work
// is checkpointed), waits for it to exit and releases the data directory.
// Calling Stop again returns the first result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = errors.Join(c.stopPostmaster(), c.out.Err())
		c.removeSocketDir()
		c.lock.release()
	})
	return c.stopErr
}

// Restart stops the server in mode "fast" (SIGINT) or "immediate" (SIGQUIT: a crash,
// recovered from the WAL at start) and starts it again on the same socket. For fault tests.
func (c *Cluster) Restart(ctx context.Context, mode string) error {
	sig := map[string]syscall.Signal{"fast": syscall.SIGINT, "immediate": syscall.SIGQUIT}[mode]
	if sig == 0 {
		return fmt.Errorf("pglocal: Restart mode %q: want fast or immediate", mode)
	}
	if err := c.stopWith(sig); err != nil && sig == syscall.SIGINT {
		return err
	}
	if err := c.launch(ctx); err != nil {
		return errors.Join(err, c.out.Err())
	}
	return nil
}

func newCluster(opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("pglocal: Options.DataDir is required")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	u, err := clusterUser()
	if err != nil {
		return nil, err
	}
	return &Cluster{
		binDir:  binDir,
		dataDir: dataDir,
		user:    u,
		out:     newOutputSink(opts.Log),
		preload: opts.PreloadLibraries,
	}, nil
}

// makeDataDir creates DataDir (0700) and its missing parents (0755, so the
// unprivileged cluster user can traverse them); created reports whether
// DataDir is new.
func (c *Cluster) makeDataDir() (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(c.dataDir), 0o755); err != nil {
		return false, fmt.Errorf("pglocal: %w", err)
	}
	err = os.Mkdir(c.dataDir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pglocal: %w", err)
	}
	return true, nil
}

// placeCluster decides where pgdata lives: in DataDir when the cluster user
// can reach it, else (root only) in a state directory keyed by DataDir's path,
// so the user never has to open up their home directory.
func (c *Cluster) placeCluster() (created bool, err error) {
	inside := filepath.Join(c.dataDir, "pgdata")
	blocked := c.user.blockingAncestor(c.dataDir)
	if blocked == "" {
		c.clusterRoot, c.pgData = c.dataDir, inside
		return false, nil
	}
	if _, err := os.Stat(filepath.Join(inside, "PG_VERSION")); err == nil {
		// A cluster made while the path was open: moving it is not ours to do.
		return false, fmt.Errorf("pglocal: the cluster in %s runs as user %q, which can no longer traverse %s; restore its search permission (chmod o+x %s)",
			inside, c.user.name, blocked, shellQuote(blocked))
	}
	sum := sha256.Sum256([]byte(c.dataDir))
	root := filepath.Join(stateRoot, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(stateRoot, 0o755); err != nil {
		return false, fmt.Errorf("pglocal: state directory for the cluster: %w", err)
	}
	if b := c.user.blockingAncestor(root); b != "" {
		return false, fmt.Errorf("pglocal: user %q can reach neither %s (blocked at %s) nor the state directory %s (blocked at %s)", c.user.name, c.dataDir, blocked, root, b)
	}
	err = os.Mkdir(root, 0o700)
	if errors.Is(err, fs.ErrExist) && c.newDataDir {
		// The cluster of an earlier data directory at this path, deleted since: whoever
		// deleted it expects a new, empty installation, not its old boxes. It is data, so it
		// is moved aside, not deleted (SetAside says where).
		if err := c.moveAside(root); err != nil {
			return false, err
		}
		err = os.Mkdir(root, 0o700)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("pglocal: %w", err)
	}
	c.clusterRoot, c.pgData = root, filepath.Join(root, "pgdata")
	return err == nil, nil
}

// moveAside renames the state directory root out of the way, unless its cluster still runs
// (a server of the deleted data directory that was never stopped).
func (c *Cluster) moveAside(root string) error {
	c.pgData = filepath.Join(root, "pgdata")
	if pid, err := c.postmasterPID(); err == nil && pid != 0 && c.processOf(pid) == procCluster {
		return fmt.Errorf("pglocal: the cluster in %s, of an earlier --data-dir at this path, still runs (PID %d); stop it (kill %d) and start again", c.pgData, pid, pid)
	}
	aside := root + ".set-aside-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(root, aside); err != nil {
		return fmt.Errorf("pglocal: setting aside the cluster of a deleted data directory: %w", err)
	}
	c.setAside = aside
	return nil
}

// SetAside is where Start moved the cluster of a deleted data directory at DataDir's path
// ("" when it did not).
func (c *Cluster) SetAside() string { return c.setAside }

// StoppedLeftover is the PID of the PostgreSQL server a dead owner had left running on this
// cluster, which Start stopped before starting its own (0 when there was none).
func (c *Cluster) StoppedLeftover() int { return c.leftover }

// stopLeftover runs with the lock held, so no live owner uses this cluster. A
// postmaster.pid naming this cluster's live postmaster is the server of an
// owner that died: stop it. A pid file naming a dead process is left to
// PostgreSQL, which ignores it; one naming some other live process (a reused
// PID) or holding no valid PID would make PostgreSQL refuse to start, so it
// is removed.
func (c *Cluster) stopLeftover() error {
	path := filepath.Join(c.pgData, "postmaster.pid")
	pid, err := c.postmasterPID()
	if err != nil {
		return removeFile(path)
	}
	if pid == 0 {
		return nil
	}
	switch c.processOf(pid) {
	case procGone:
		return nil
	case procOther:
		return removeFile(path)
	}
	c.leftover = pid
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, stopTimeout}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, 10 * time.Second}} {
		if err := syscall.Kill(pid, step.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pglocal: stopping the PostgreSQL server (PID %d) left on %s: %w", pid, c.pgData, err)
		}
		deadline := time.Now().Add(step.wait)
		for c.processOf(pid) == procCluster && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
		}
		if c.processOf(pid) != procCluster {
			return nil
		}
	}
	return fmt.Errorf("pglocal: the PostgreSQL server (PID %d) left on %s does not stop, even on SIGKILL", pid, c.pgData)
}

type procKind int

const (
	procGone    procKind = iota // no such process, a zombie, or another user's (EPERM)
	procOther                   // alive, but not a postmaster of this cluster
	procCluster                 // alive, with this cluster's directory as its working directory
)

// processOf classifies pid. A postmaster's working directory is its data
// directory, which is what tells this cluster's server from an unrelated
// process that reuses a stale PID.
func (c *Cluster) processOf(pid int) procKind {
	if err := syscall.Kill(pid, 0); err != nil {
		return procGone // ESRCH, or EPERM: like PostgreSQL, not this cluster's
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procGone
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return procGone
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		if syscall.Kill(pid, 0) != nil {
			return procGone
		}
		return procOther
	}
	want := c.pgData
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	if cwd == want {
		return procCluster
	}
	return procOther
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pglocal: %w", err)
	}
	return nil
}

// postmasterPID returns the PID recorded in postmaster.pid, or 0 when there
// is no such file; an error when the file holds no valid PID.
func (c *Cluster) postmasterPID() (int, error) {
	lines, err := c.pidFileLines()
	if err != nil || lines == nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid == 0 {
		return 0, fmt.Errorf("pglocal: postmaster.pid holds no valid PID")
	}
	if pid < 0 {
		pid = -pid // single-user mode records the PID negated
	}
	return pid, nil
}

// pidFileLines reads postmaster.pid (nil when it does not exist).
func (c *Cluster) pidFileLines() ([]string, error) {
	data, err := os.ReadFile(filepath.Join(c.pgData, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pglocal: %w", err)
	}
	return strings.Split(string(data), "\n"), nil
}

// prepareSocketDir makes the private socket directory: /tmp/agentbox-<hash of
// pgdata>, reused across starts. A path someone else has taken (not a plain
// directory of ours) is left alone for a fresh random one.
func (c *Cluster) prepareSocketDir() error {
	sum := sha256.Sum256([]byte(c.pgData))
	dir := filepath.Join(socketBase, "agentbox-"+hex.EncodeToString(sum[:8]))
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) && !c.ownsDir(dir) {
		dir, err = os.MkdirTemp(socketBase, "agentbox-")
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pglocal: socket directory: %w", err)
	}
	c.socketDir = dir
	// An existing directory keeps its mode under Mkdir; it must stay private.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	return c.user.chownTree(dir)
}

// ownsDir: dir is a real directory (not a symlink) owned by us or the cluster user.
func (c *Cluster) ownsDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return st.Uid == uint32(os.Geteuid()) || (c.user != nil && st.Uid == c.user.uid)
}

// removeSocketDir removes the socket directory once the server has removed
// its socket (os.Remove refuses a non-empty directory, e.g. a live server's).
func (c *Cluster) removeSocketDir() {
	if c.socketDir != "" {
		os.Remove(c.socketDir) //nolint:errcheck
	}
}

// initIfNeeded runs initdb unless pgdata already holds a cluster.
func (c *Cluster) initIfNeeded(ctx context.Context, fast bool) error {
	_, err := os.Stat(filepath.Join(c.pgData, "PG_VERSION"))
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pglocal: %w", err)
	}
	entries, err := os.ReadDir(c.pgData)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pglocal: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("pglocal: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION; an interrupted initdb?); to start afresh, remove it: rm -rf %s", c.pgData, shellQuote(c.pgData))
	}
	// initdb runs as the cluster user, in the empty pgdata giveClusterUserPGData made its own.
	args := []string{"-D", c.pgData, "--auth=trust", "-U", superuser, "--encoding=UTF8", "--locale=C"}
	if fast {
		args = append(args, "--no-sync")
	}
	return c.run(c.command(ctx, "initdb", args...), "initdb")
}

// giveClusterUserPGData hands pgdata, and nothing else, to the cluster user (when the
// cluster runs as another user than ours): it creates pgdata (0700) if missing and gives it
// and everything in it to that user, and lets that user traverse clusterRoot without owning
// it (group search, the group being the cluster user's). The rest of the data directory —
// the admin token, key files, uploads, the server's log — stays ours, unreadable by the
// cluster user; what an earlier version handed over with pgdata (it gave the cluster user
// the whole data directory) is taken back.
func (c *Cluster) giveClusterUserPGData() error {
	if c.user == nil {
		return nil
	}
	if err := c.user.reclaimTree(c.clusterRoot, c.pgData); err != nil {
		return err
	}
	fi, err := os.Stat(c.clusterRoot)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	if !c.user.canSearch(fi) {
		if err := os.Chown(c.clusterRoot, os.Geteuid(), int(c.user.gid)); err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
		if err := os.Chmod(c.clusterRoot, fi.Mode().Perm()|0o010); err != nil {
			return fmt.Errorf("pglocal: %w", err)
		}
	}
	if err := os.Mkdir(c.pgData, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pglocal: %w", err)
	}
	return c.user.chownTree(c.pgData)
}

// configure writes the settings Start owns and makes postgresql.conf include
// them. They are rewritten on every start so Options (e.g. Fast) always apply.
func (c *Cluster) configure(fast bool) error {
	if err := os.WriteFile(filepath.Join(c.pgData, confFile), []byte(c.settings(fast)), 0o600); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	return c.includeSettings()
}

func (c *Cluster) settings(fast bool) string {
	durable := "on"
	if fast {
		durable = "off"
	}
	return fmt.Sprintf(`# Written by agentbox (internal/pglocal) on every start; edits are overwritten.
# Put your own settings in postgresql.conf above the include, or use ALTER SYSTEM.
listen_addresses = ''
port = %d
unix_socket_directories = '%s'
unix_socket_permissions = 0700
max_connections = 200
fsync = %s
synchronous_commit = %s
full_page_writes = %s
`, port, c.socketDir, durable, durable, durable) + c.preloadSetting()
}

// preloadSetting is the shared_preload_libraries line of Options.PreloadLibraries ("" without).
func (c *Cluster) preloadSetting() string {
	if len(c.preload) == 0 {
		return ""
	}
	return fmt.Sprintf("shared_preload_libraries = '%s'\n", strings.Join(c.preload, ","))
}

// includeSettings appends the include directive to postgresql.conf once;
// being last, our settings override initdb's defaults there.
func (c *Cluster) includeSettings() error {
	path := filepath.Join(c.pgData, "postgresql.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	directive := fmt.Sprintf("include '%s'", confFile)
	if strings.Contains(string(data), directive) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	_, err = fmt.Fprintf(f, "\n# Settings managed by agentbox.\n%s\n", directive)
	return errors.Join(err, f.Close())
}

// launch starts the postmaster as our child and waits until it is ready.
// The child gets a parent-death signal so it never outlives this process.
// Pdeathsig fires when the creating thread ends, so the starting goroutine
// stays locked to its thread, waiting for the postmaster, for the server's life.
func (c *Cluster) launch(ctx context.Context) error {
	started := make(chan error, 1)
	c.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// Not ctx: the caller's context (often ended by the very signal that asks
		// for a shutdown) must not SIGKILL the server; Stop shuts it down cleanly.
		cmd := c.command(context.Background(), "postgres", "-D", c.pgData)
		cmd.Stdout, cmd.Stderr = c.out, c.out
		// SIGINT is PostgreSQL's fast shutdown. Its own process group keeps a
		// terminal's ^C for us: we decide when the server stops.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
		cmd.SysProcAttr.Setpgid = true
		if err := cmd.Start(); err != nil {
			close(c.exited)
			started <- fmt.Errorf("pglocal: starting postgres (as %s): %w", c.user.describe(), err)
			return
		}
		c.postmaster = cmd.Process
		started <- nil
		c.exitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return errors.Join(err, c.stopPostmaster())
	}
	return nil
}

// waitReady polls postmaster.pid until our postmaster reports "ready" (what
// pg_ctl -w watches), the postmaster exits, ctx ends or startTimeout passes.
func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.After(startTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if lines, _ := c.pidFileLines(); len(lines) > 7 && strings.TrimSpace(lines[0]) == strconv.Itoa(c.postmaster.Pid) &&
			strings.TrimSpace(lines[7]) == "ready" {
			return nil
		}
		select {
		case <-c.exited:
			return c.withOutput(fmt.Errorf("pglocal: postgres (as %s) exited during start: %v", c.user.describe(), c.exitErr))
		case <-ctx.Done():
			return fmt.Errorf("pglocal: waiting for PostgreSQL to start: %w", ctx.Err())
		case <-deadline:
			return c.withOutput(fmt.Errorf("pglocal: PostgreSQL did not accept connections within %v", startTimeout))
		case <-tick.C:
		}
	}
}

// stopPostmaster asks our postmaster for a fast shutdown and waits for it to
// exit, escalating to an immediate shutdown and then SIGKILL if it hangs.
func (c *Cluster) stopPostmaster() error { return c.stopWith(syscall.SIGINT) }

// stopWith sends first, then escalates (SIGQUIT, SIGKILL) while the postmaster does not exit.
func (c *Cluster) stopWith(first syscall.Signal) error {
	if c.postmaster == nil {
		return nil
	}
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, stopTimeout}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, 10 * time.Second}}
	for len(steps) > 1 && steps[0].sig != first {
		steps = steps[1:]
	}
	for _, step := range steps {
		select {
		case <-c.exited:
			return c.exitError()
		default:
		}
		c.postmaster.Signal(step.sig) //nolint:errcheck // it may have exited meanwhile
		select {
		case <-c.exited:
			if step.sig != first {
				return fmt.Errorf("pglocal: PostgreSQL did not exit within %v of %v; stopped with %v", stopTimeout, first, step.sig)
			}
			return c.exitError()
		case <-time.After(step.wait):
		}
	}
	return fmt.Errorf("pglocal: PostgreSQL (PID %d) did not exit, even on SIGKILL", c.postmaster.Pid)
}

func (c *Cluster) exitError() error {
	if c.exitErr != nil {
		return c.withOutput(fmt.Errorf("pglocal: postgres: %w", c.exitErr))
	}
	return nil
}

// ensureDatabase creates database name unless it exists.
func (c *Cluster) ensureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return c.withOutput(fmt.Errorf("pglocal: connecting to the new server: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("pglocal: looking up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
		return nil
	}
	if err != nil {
		return fmt.Errorf("pglocal: creating database %s: %w", name, err)
	}
	return nil
}

// command prepares a PostgreSQL binary to run as the cluster user, from
// DataDir (the user may not be able to access our working directory), with
// PG* variables removed so nothing but our arguments selects data directory,
// port or options.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.clusterRoot
	cmd.Env = environWithoutPG()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	// If ctx kills the command, grandchildren could keep its output open; do
	// not wait on them forever.
	cmd.WaitDelay = 5 * time.Second
	c.user.applyTo(cmd)
	return cmd
}

// run executes a short-lived command with its output sent to the sink.
func (c *Cluster) run(cmd *exec.Cmd, what string) error {
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Run(); err != nil {
		return c.withOutput(fmt.Errorf("pglocal: %s (as %s): %w", what, c.user.describe(), err))
	}
	return nil
}

// withOutput appends recent PostgreSQL output, which usually holds the real
// reason for a failed command.
func (c *Cluster) withOutput(err error) error {
	if tail := c.out.Tail(); tail != "" {
		return fmt.Errorf("%w%s", err, tail)
	}
	return err
}

func environWithoutPG() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// queryEscape escapes a URL query value the way libpq and pgx decode it:
// they do not read "+" as a space, so spaces must be %20.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// shellQuote quotes a path for a remedy printed as a shell command.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
