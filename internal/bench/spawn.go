package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/pglocal"
)

// localPostgres is the machine's PostgreSQL server, used when it answers.
const localPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// spawned is a benchmark database plus an `agentbox serve` subprocess on it.
type spawned struct {
	baseURL    string
	dbURL      string
	dbSource   string
	adminToken string
	pid        int

	cmd     *exec.Cmd
	exited  chan struct{}
	admin   *pgx.Conn // on the server's maintenance database, to drop ours
	dbName  string
	cluster *pglocal.Cluster
	dir     string
}

// spawn creates a fresh database agentbox_bench_<random> on the chosen PostgreSQL server
// and starts `agentbox serve` on it as a subprocess (so its RSS is its own).
func spawn(ctx context.Context, cfg Config, prog *progress) (s *spawned, err error) {
	s = &spawned{exited: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.stop())
			s = nil
		}
	}()
	s.dir, err = os.MkdirTemp("", "agentbox-bench-")
	if err != nil {
		return s, err
	}
	// The cluster user (postgres, when we are root) must traverse the directory.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return s, err
	}
	adminURL, source, err := s.chooseServer(ctx, cfg, prog)
	if err != nil {
		return s, err
	}
	s.dbSource = source
	s.admin, err = pgx.Connect(ctx, adminURL)
	if err != nil {
		return s, fmt.Errorf("connecting to PostgreSQL (%s): %w", source, err)
	}
	s.dbName = "agentbox_bench_" + randomHex(6)
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.dbName}.Sanitize()); err != nil {
		s.dbName = ""
		return s, fmt.Errorf("creating the benchmark database: %w", err)
	}
	s.dbURL, err = withDatabase(adminURL, s.dbName)
	if err != nil {
		return s, err
	}
	serverDB := s.dbURL
	if cfg.ServerPoolMaxConns > 0 {
		serverDB = withParam(serverDB, "pool_max_conns", fmt.Sprint(cfg.ServerPoolMaxConns))
	}

	bin := cfg.AgentboxBin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return s, err
		}
	}
	s.adminToken = "bench-admin-" + randomHex(16)
	addrFile := filepath.Join(s.dir, "addr")
	args := []string{"serve", "--database-url", serverDB, "--addr", "127.0.0.1:0", "--addr-file", addrFile,
		"--data-dir", filepath.Join(s.dir, "serve")}
	if cfg.Pprof {
		args = append(args, "--pprof")
	}
	logPath := filepath.Join(s.dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return s, err
	}
	defer logFile.Close()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "AGENTBOX_ADMIN_TOKEN="+s.adminToken)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	prog.logf("bench: starting %s serve on database %s (%s)", bin, s.dbName, source)
	if err := s.cmd.Start(); err != nil {
		return s, fmt.Errorf("starting the server: %w", err)
	}
	s.pid = s.cmd.Process.Pid
	go func() { s.cmd.Wait(); close(s.exited) }() //nolint:errcheck // exit status is in the log

	deadline := time.After(2 * time.Minute)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			s.baseURL = "http://" + strings.TrimSpace(string(b))
			return s, nil
		}
		select {
		case <-s.exited:
			return s, fmt.Errorf("the server exited at start:\n%s", tail(logPath, 20))
		case <-deadline:
			return s, fmt.Errorf("the server did not write %s within 2 minutes (does `serve` know --addr-file?):\n%s", addrFile, tail(logPath, 20))
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// chooseServer picks the PostgreSQL server: cfg.DatabaseURL, else the local server on
// 127.0.0.1:5432 if it answers (unless Embedded), else an embedded cluster in s.dir.
func (s *spawned) chooseServer(ctx context.Context, cfg Config, prog *progress) (adminURL, source string, err error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, "given database URL", nil
	}
	if !cfg.Embedded {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(pctx, localPostgres); err == nil {
			conn.Close(ctx) //nolint:errcheck
			return localPostgres, "local server 127.0.0.1:5432", nil
		}
	}
	prog.logf("bench: starting an embedded PostgreSQL cluster in %s", s.dir)
	logFile, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return "", "", err
	}
	// pg_stat_statements gives the report its per-statement figures; a PostgreSQL
	// installed without the contrib module cannot preload it, so the run goes on without.
	s.cluster, err = pglocal.Start(ctx, pglocal.Options{DataDir: filepath.Join(s.dir, "pg"), Log: logFile,
		PreloadLibraries: []string{"pg_stat_statements"}})
	if err != nil {
		prog.logf("bench: embedded PostgreSQL with pg_stat_statements did not start (%v); starting it without", err)
		s.cluster, err = pglocal.Start(ctx, pglocal.Options{DataDir: filepath.Join(s.dir, "pg-plain"), Log: logFile})
	}
	if err != nil {
		return "", "", fmt.Errorf("embedded PostgreSQL: %w", err)
	}
	return s.cluster.URL("postgres"), "embedded cluster (internal/pglocal, durable settings)", nil
}

// stop ends the server, drops the database, stops an embedded cluster and removes the
// temporary directory. Safe on a partly started s.
func (s *spawned) stop() error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill() //nolint:errcheck
			<-s.exited
		}
	}
	if s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if s.dbName != "" {
			if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
				errs = append(errs, fmt.Errorf("dropping %s: %w", s.dbName, err))
			}
		}
		s.admin.Close(ctx) //nolint:errcheck
		cancel()
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// withDatabase returns rawURL pointing at database name.
func withDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("the database URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// withParam adds one query parameter to a URL.
func withParam(rawURL, key, value string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
