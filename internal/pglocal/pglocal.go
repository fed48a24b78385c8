// Package pglocal runs a private PostgreSQL cluster with the machine's own
// PostgreSQL binaries: it is the embedded default of `agentbox serve` and the
// fallback server of the test harness.
//
// Layout under Options.DataDir:
//
//	pgdata/             the cluster (initdb on first start, reused afterwards)
//	pgdata/agentbox.conf settings rewritten on every start (included from postgresql.conf)
//	run/                the unix socket directory (mode 0700)
//
// The server listens only on the unix socket in run/ (listen_addresses is empty),
// so it never collides with another PostgreSQL on the machine, and only the
// cluster's OS user (and root) can reach it. Authentication is "trust" for the
// superuser "agentbox": the 0700 socket directory is the access boundary.
//
// Unix socket addresses are limited to 107 bytes, so DataDir must be short
// enough for DataDir/run/.s.PGSQL.5432; Start fails with a clear message
// otherwise (no socket is placed outside DataDir).
//
// initdb, pg_ctl and postgres refuse to run as root. When the caller is root
// they run as the "postgres" system user, or "nobody" if that does not exist;
// DataDir is chowned to that user, and every ancestor of DataDir must be
// traversable by it.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
	// maxSocketPath is the longest unix socket path PostgreSQL accepts
	// (sizeof(sun_path) minus the terminating NUL on Linux).
	maxSocketPath = 107
	// pgCtlTimeout bounds pg_ctl's own readiness/shutdown polling.
	pgCtlTimeout = 60 * time.Second
	// confFile holds the settings Start controls; rewritten on every start.
	confFile = "agentbox.conf"
	// pipeDrainTimeout bounds waiting for the server's output to be drained.
	pipeDrainTimeout = 10 * time.Second
)

// Options configures Start.
type Options struct {
	// DataDir holds the cluster (DataDir/pgdata) and its socket directory
	// (DataDir/run); created if missing.
	DataDir string
	// Log receives initdb, pg_ctl and server output (nil = discard). It must
	// not block for long: the server stalls while its log pipe is full.
	Log io.Writer
	// Fast trades durability for speed (fsync, synchronous_commit and
	// full_page_writes off; initdb --no-sync). For tests only: a machine crash
	// can corrupt the cluster.
	Fast bool
}

// Cluster is a running server started by Start.
type Cluster struct {
	binDir    string
	dataDir   string
	pgData    string
	socketDir string
	user      *osUser // nil: processes run as the current user
	out       *outputSink
	pipe      *serverPipe

	stopOnce sync.Once
	stopErr  error
}

// Start initializes a cluster in opts.DataDir when there is none, starts it,
// waits until it accepts connections and creates the "agentbox" database if
// missing. An existing cluster is reused. If a server from an earlier run is
// still alive on DataDir, Start fails rather than share or kill it; a stale
// postmaster.pid (its process gone) is handled by PostgreSQL itself.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.startup(ctx, opts.Fast); err != nil {
		return nil, errors.Join(err, c.out.Err())
	}
	return c, nil
}

func (c *Cluster) startup(ctx context.Context, fast bool) error {
	if err := c.prepareDataDir(); err != nil {
		return err
	}
	if err := c.checkNoLiveServer(); err != nil {
		return err
	}
	if err := c.initIfNeeded(ctx, fast); err != nil {
		return err
	}
	if err := c.configure(fast); err != nil {
		return err
	}
	if err := c.user.chownTree(c.dataDir); err != nil {
		return err
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	if err := c.ensureDatabase(ctx, defaultDatabase); err != nil {
		return errors.Join(err, c.stop("fast"))
	}
	return nil
}

// URL returns a pgx/libpq URL for database over the cluster's unix socket.
// The port is explicit so a PGPORT in the environment cannot redirect it.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		superuser, url.PathEscape(database), queryEscape(c.socketDir), port)
}

// Stop shuts the server down with pg_ctl stop -m fast (clients are
// disconnected, work is checkpointed) and waits for it to exit. Only this
// cluster's postmaster is signalled. Calling Stop again returns the first
// result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = errors.Join(c.stop("fast"), c.out.Err()) })
	return c.stopErr
}

// Restart stops the server with pg_ctl stop -m mode ("fast" or "immediate": the latter is a
// crash, recovered from the WAL at start) and starts it again. For fault tests.
func (c *Cluster) Restart(ctx context.Context, mode string) error {
	if err := c.stop(mode); err != nil {
		return err
	}
	if err := c.start(ctx); err != nil {
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
	socketDir := filepath.Join(dataDir, "run")
	if err := checkSocketDir(socketDir); err != nil {
		return nil, err
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
		binDir:    binDir,
		dataDir:   dataDir,
		pgData:    filepath.Join(dataDir, "pgdata"),
		socketDir: socketDir,
		user:      u,
		out:       newOutputSink(opts.Log),
	}, nil
}

// checkSocketDir rejects socket directories PostgreSQL could not use: socket
// addresses are length-limited, and the directory is written into a quoted,
// comma-separated setting.
func checkSocketDir(dir string) error {
	sock := filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", port))
	if len(sock) > maxSocketPath {
		return fmt.Errorf("pglocal: data directory path is too long: the unix socket %s would be %d bytes, over the %d-byte limit for unix socket addresses; use a shorter DataDir",
			sock, len(sock), maxSocketPath)
	}
	if strings.ContainsAny(dir, ",'\"\\\n") {
		return fmt.Errorf("pglocal: data directory path %q contains a character (, ' \" \\ or newline) that cannot be used in unix_socket_directories", dir)
	}
	return nil
}

// prepareDataDir creates DataDir (0700) and its missing parents (0755, so the
// unprivileged cluster user can traverse them), then checks that user can
// reach it.
func (c *Cluster) prepareDataDir() error {
	if err := os.MkdirAll(filepath.Dir(c.dataDir), 0o755); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	if err := os.Mkdir(c.dataDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pglocal: %w", err)
	}
	if c.user == nil {
		return nil
	}
	return c.user.checkTraversable(c.dataDir)
}

// checkNoLiveServer refuses to start when postmaster.pid names a live process:
// that is a server left running by an earlier (crashed) run, and starting a
// second one, or killing it, is not ours to decide.
func (c *Cluster) checkNoLiveServer() error {
	pid, alive, err := c.liveServer()
	if err != nil || !alive {
		return err
	}
	return fmt.Errorf("pglocal: a PostgreSQL server (PID %d) is still running on %s, probably left over from a previous run that did not shut down; stop it (pg_ctl stop -D %s -m fast, as %s) and retry",
		pid, c.pgData, c.pgData, c.user.describe())
}

// liveServer reports the PID in postmaster.pid and whether it is alive. Like
// PostgreSQL, it treats a process we may not signal (EPERM) as another user's,
// hence not this cluster's postmaster: the pid file is stale.
func (c *Cluster) liveServer() (pid int, alive bool, err error) {
	pid, err = c.postmasterPID()
	if err != nil || pid == 0 {
		return pid, false, err
	}
	return pid, syscall.Kill(pid, 0) == nil, nil
}

// postmasterPID returns the PID recorded in postmaster.pid, or 0 when there
// is no such file.
func (c *Cluster) postmasterPID() (int, error) {
	path := filepath.Join(c.pgData, "postmaster.pid")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pglocal: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("pglocal: %s has no valid PID (%w); if no server is running on this data directory, remove the file and retry", path, err)
	}
	if pid < 0 {
		pid = -pid // single-user mode records the PID negated
	}
	if pid == 0 {
		return 0, fmt.Errorf("pglocal: %s records PID 0; if no server is running on this data directory, remove the file and retry", path)
	}
	return pid, nil
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
		return fmt.Errorf("pglocal: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION; an interrupted initdb?); remove it to start afresh", c.pgData)
	}
	// initdb runs as the cluster user and must be able to create pgdata.
	if err := c.user.chownTree(c.dataDir); err != nil {
		return err
	}
	args := []string{"-D", c.pgData, "--auth=trust", "-U", superuser, "--encoding=UTF8", "--locale=C"}
	if fast {
		args = append(args, "--no-sync")
	}
	return c.run(c.command(ctx, "initdb", args...), "initdb")
}

// configure writes the settings Start owns and makes postgresql.conf include
// them. They are rewritten on every start so Options (e.g. Fast) always apply.
func (c *Cluster) configure(fast bool) error {
	if err := os.MkdirAll(c.socketDir, 0o700); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	// An existing directory keeps its mode under MkdirAll; it must stay private.
	if err := os.Chmod(c.socketDir, 0o700); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
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
`, port, c.socketDir, durable, durable, durable)
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

// start launches the postmaster with pg_ctl, which polls until the server is
// ready (or has failed) within its timeout.
func (c *Cluster) start(ctx context.Context) error {
	pipe, err := startServerPipe(c.out)
	if err != nil {
		return err
	}
	c.pipe = pipe
	cmd := c.command(ctx, "pg_ctl", "start", "-D", c.pgData, "-w", "-t", pgCtlSeconds(ctx))
	cmd.Stdout, cmd.Stderr = pipe.w, pipe.w
	runErr := cmd.Run()
	// Our copy of the write end must go, so the pipe reaches EOF when the server exits.
	closeErr := pipe.w.Close()
	if runErr == nil && closeErr == nil {
		return nil
	}
	// pg_ctl may have given up (timeout, cancelled ctx) on a server that is
	// still coming up; do not leave it running behind a failed Start. Its
	// output is drained by then, so the tail holds the server's last words.
	stopErr := c.stop("immediate")
	err = c.withOutput(fmt.Errorf("pglocal: pg_ctl start: %w", errors.Join(runErr, closeErr)))
	return errors.Join(err, stopErr)
}

// stop runs pg_ctl stop in the given mode if the server is running (a
// crashed one leaves a stale pid file pg_ctl would fail on), then waits for
// the server's output to be drained.
func (c *Cluster) stop(mode string) error {
	_, alive, err := c.liveServer()
	if alive {
		ctx, cancel := context.WithTimeout(context.Background(), pgCtlTimeout+10*time.Second)
		defer cancel()
		err = c.run(c.command(ctx, "pg_ctl", "stop", "-D", c.pgData, "-m", mode, "-w", "-t", pgCtlSeconds(ctx)), "pg_ctl stop")
	}
	c.waitPipe()
	return err
}

// waitPipe waits, bounded, until the exited server's last output is drained.
// A timeout is not an error of the shutdown itself: it means some other
// process still holds the pipe, and the drain goroutine ends when it closes.
func (c *Cluster) waitPipe() {
	if c.pipe == nil {
		return
	}
	select {
	case <-c.pipe.done:
	case <-time.After(pipeDrainTimeout):
	}
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
	cmd.Dir = c.dataDir
	cmd.Env = environWithoutPG()
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

// pgCtlSeconds is pg_ctl's -t: the default timeout, or less if ctx ends sooner.
func pgCtlSeconds(ctx context.Context) string {
	d := pgCtlTimeout
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		d = time.Until(deadline)
	}
	return strconv.Itoa(max(1, int(d.Seconds())))
}

// queryEscape escapes a URL query value the way libpq and pgx decode it:
// they do not read "+" as a space, so spaces must be %20.
func queryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
