package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/migrate"
	"github.com/agentbox/agentbox/internal/pglocal"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/upload"
	"github.com/agentbox/agentbox/internal/version"
)

// RunConfig is `agentbox serve`.
type RunConfig struct {
	Addr string
	// DatabaseURL selects an existing database; "" runs the embedded cluster in DataDir.
	DatabaseURL string
	// DataDir holds the embedded cluster, its log and the generated admin token.
	DataDir string
	// AdminToken is AGENTBOX_ADMIN_TOKEN; "" generates one once, kept in DataDir/admin-token.
	AdminToken        string
	MCPAllowedOrigins []string
	MetricsToken      string // /metrics is unauthenticated when ""
	AddrFile          string // once listening, the bound host:port is written here
	Pprof             bool   // serve /debug/pprof/ (benchmarks only)
	// UploadDir holds temporary upload files ("" = uploads/ in DataDir); files a crashed
	// server left there are removed at start.
	UploadDir string
	Stderr    io.Writer
}

// shutdownSignals end the server cleanly: ^C, a service manager, and a closed terminal or
// dropped SSH session (SIGHUP, whose default action would kill us before the cluster stops)
// unless SIGHUP was ignored when we started (nohup): catching it would undo that choice.
func shutdownSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// shutdownGrace is how long a requested shutdown waits for the requests in flight. Those
// still running after it, or at a second signal, are abandoned: their contexts end, which
// ends their database work as a lost connection would (a client retrying with its
// idempotency key learns the outcome), and the server stops.
const shutdownGrace = 10 * time.Second

// storeCloseWait bounds how long a stopping server waits for its database connections to
// close (store.CloseWithin), so that a database that hangs cannot stretch the shutdown.
const storeCloseWait = 2 * time.Second

// Run serves until a shutdown signal. Without a database URL it owns an embedded
// PostgreSQL cluster in the data directory (pglocal: locked for our life, stopped on every
// exit path; a postmaster outliving us shuts itself down) and stops it on return.
func Run(cfg RunConfig) (err error) {
	// A write to a closed stdout/stderr (`agentbox serve | tee log` after tee ended) would
	// otherwise kill us with SIGPIPE halfway through the shutdown; caught, it only fails
	// that write.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	signals := shutdownSignals()
	ctx, stop := signal.NotifyContext(context.Background(), signals...)
	defer stop()
	tuneGC(os.Getenv)
	log := slog.New(slog.NewTextHandler(cfg.Stderr, nil))

	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	created, err := makeDir(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	listening := false
	stateDir := "" // the cluster's directory when it lives outside dir (pglocal's state directory)
	defer func() {
		// A start that failed leaves nothing behind that it made (its cluster is stopped by now).
		if err != nil && created && !listening {
			if stateDir != "" {
				os.RemoveAll(stateDir) //nolint:errcheck
			}
			os.RemoveAll(dir) //nolint:errcheck
		}
	}()
	url := cfg.DatabaseURL
	var clusterExited <-chan struct{} // nil (never ready) with an external database
	var clusterExitErr func() error
	if url == "" {
		cluster, err := startCluster(ctx, dir, created, log)
		if err != nil {
			return err
		}
		clusterExited, clusterExitErr = cluster.Exited(), cluster.ExitErr
		if root := filepath.Dir(cluster.PGData()); root != dir {
			stateDir = root
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				log.Error("stopping embedded PostgreSQL", slog.Any("err", err))
			}
		}()
		url = cluster.URL("agentbox")
	}
	token, tokenFile, err := adminToken(dir, cfg.AdminToken)
	if err != nil {
		return err
	}
	if tokenFile != "" && cfg.DatabaseURL != "" {
		// Each instance would otherwise check admin calls against a token of its own: behind a
		// load balancer the admin CLI and the admin UI would fail at random.
		log.Warn("AGENTBOX_ADMIN_TOKEN is not set: this server uses an admin token it generated; every instance on this database needs the same AGENTBOX_ADMIN_TOKEN, or admin calls and admin UI sessions fail on the others",
			slog.String("admin_token_file", tokenFile))
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer func() {
		if !st.CloseWithin(storeCloseWait) {
			log.Warn("the database does not answer: its connections were left to close with the process", slog.Duration("waited", storeCloseWait))
		}
	}()
	if applied, known, ahead, err := migrate.Ahead(ctx, st.Pool()); err == nil && ahead {
		log.Warn("the database schema is newer than this binary (a newer agentbox migrated it): /readyz answers 503 until an agentbox binary that knows the schema runs",
			slog.Int("schema_version", applied), slog.Int("binary_schema_version", known))
	}
	statsCtx, stopStats := context.WithCancel(ctx)
	defer stopStats()
	go st.KeepStatistics(statsCtx, 2*time.Second, log)
	go st.KeepIdempotencyExpiry(statsCtx, store.IdempotencyExpiryInterval, time.Now, log)

	uploadDir := cfg.UploadDir
	if uploadDir == "" {
		uploadDir = filepath.Join(dir, "uploads")
	}
	uploads, err := upload.NewStager(uploadDir)
	if err != nil {
		return err
	}
	defer uploads.Close()

	svc := service.New(service.Options{Store: st, Log: log})
	go svc.KeepRetryingCleanups(statsCtx)
	handler := Handler(Config{
		Store:             st,
		Service:           svc,
		AdminToken:        token,
		Log:               log,
		MCPAllowedOrigins: cfg.MCPAllowedOrigins,
		MetricsToken:      cfg.MetricsToken,
		Version:           version.String(),
		Uploads:           uploads,
	})
	if cfg.Pprof {
		handler = withPprof(handler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	if cfg.AddrFile != "" {
		if err := writeAddrFile(cfg.AddrFile, ln.Addr().String()); err != nil {
			ln.Close()
			return err
		}
	}
	listening = true
	calls, abandonCalls := context.WithCancel(context.Background()) // every request's context
	defer abandonCalls()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: httpserver.MaxListenerHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return calls }}
	where := "http://" + ln.Addr().String()
	attrs := []any{slog.String("url", where), slog.String("version", version.String())}
	if tokenFile != "" {
		attrs = append(attrs, slog.String("admin_token_file", tokenFile))
	}
	log.Info("agentbox listening", attrs...)
	fmt.Fprintf(cfg.Stderr, "agentbox: listening on %s\n", where)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var died error
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	case <-clusterExited:
		// The server owns its embedded database: without it every call would fail as
		// TEMPORARILY_UNAVAILABLE for ever while /healthz said all is well. It stops instead,
		// with an error, so that a supervisor (or the user) starts it again, which recovers
		// the cluster.
		died = fmt.Errorf("the embedded PostgreSQL in --data-dir %s exited unexpectedly (%v); stopping: start agentbox serve again to recover it (its log: %s)",
			dir, clusterExitErr(), filepath.Join(dir, "postgres.log"))
		log.Error("embedded PostgreSQL exited", slog.Any("err", clusterExitErr()))
	}
	log.Info("shutting down: no new requests; those in flight may finish", slog.Duration("grace", shutdownGrace))
	again := make(chan os.Signal, 1)
	signal.Notify(again, signals...)
	defer signal.Stop(again)
	grace, endGrace := context.WithTimeout(context.Background(), shutdownGrace)
	defer endGrace()
	go func() {
		select {
		case <-again:
			log.Warn("second signal: not waiting for the requests in flight")
			endGrace()
		case <-grace.Done():
		}
	}()
	if err := srv.Shutdown(grace); err != nil {
		log.Warn("requests still in flight at shutdown were abandoned; a retry with the same idempotency key learns whether each was written",
			slog.Duration("grace", shutdownGrace))
		abandonCalls()
		srv.Close() //nolint:errcheck // closing connections: nothing to report
	}
	return died
}

// startCluster starts the embedded cluster; its errors name the --data-dir they concern.
func startCluster(ctx context.Context, dir string, created bool, log *slog.Logger) (*pglocal.Cluster, error) {
	logFile, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	log.Info("starting embedded PostgreSQL", slog.String("data_dir", dir))
	cluster, err := pglocal.Start(ctx, pglocal.Options{DataDir: dir, Log: logFile, NewDataDir: created})
	var inUse *pglocal.InUseError
	switch {
	case errors.As(err, &inUse) && inUse.PID != 0:
		return nil, fmt.Errorf("--data-dir %s is in use by another agentbox server (PID %d); stop that one (kill %d) or give this one another --data-dir", dir, inUse.PID, inUse.PID)
	case errors.As(err, &inUse):
		return nil, fmt.Errorf("--data-dir %s is in use by another agentbox server; stop it or give this one another --data-dir", dir)
	case err != nil:
		return nil, fmt.Errorf("embedded PostgreSQL in --data-dir %s: %w", dir, err)
	}
	if pid := cluster.StoppedLeftover(); pid != 0 {
		log.Warn("stopped the embedded PostgreSQL an earlier agentbox server had left running on --data-dir (it had died without stopping it)", slog.Int("pid", pid))
	}
	if aside := cluster.SetAside(); aside != "" {
		log.Warn("--data-dir is new, but the state directory held the embedded cluster of an earlier one at this path (deleted since): it was moved aside and this server starts empty; delete it once it is not needed",
			slog.String("moved_to", aside))
	}
	if pg := cluster.PGData(); !strings.HasPrefix(pg, dir+string(filepath.Separator)) {
		log.Info("the embedded cluster lives outside --data-dir, which its user cannot reach", slog.String("pgdata", pg))
	}
	return cluster, nil
}

// makeDir creates dir (0755) and its parents; created reports whether dir is new.
func makeDir(dir string) (created bool, err error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, os.MkdirAll(dir, 0o755)
}

// adminToken is the configured token, or a token generated once and kept (0600) in the
// data directory so a newcomer can use the admin CLI without inventing one.
func adminToken(dir, configured string) (token, file string, err error) {
	if configured != "" {
		return configured, "", nil
	}
	file = filepath.Join(dir, "admin-token")
	b, err := os.ReadFile(file)
	switch {
	case err == nil && len(strings.TrimSpace(string(b))) > 0:
		return strings.TrimSpace(string(b)), file, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("reading the admin token: %w", err)
	}
	token = auth.NewSecret(auth.AdminTokenPrefix)
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the admin token: %w", err)
	}
	return token, file, nil
}

// withPprof serves net/http/pprof beside h (`serve --pprof`, used by `agentbox bench`).
func withPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}

// writeAddrFile writes the bound address atomically (`serve --addr-file`), so a reader
// never sees a partial one.
func writeAddrFile(path, addr string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
