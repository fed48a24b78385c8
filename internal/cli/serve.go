package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/pglocal"
	"github.com/agentbox/agentbox/internal/server"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/upload"
)

// serve runs the server until SIGINT/SIGTERM. Without a database URL it manages an
// embedded PostgreSQL cluster in the data directory and stops it on exit.
func (e *env) serve(args []string) error {
	fs := flag.NewFlagSet("agentbox serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	dbURL := fs.String("database-url", os.Getenv("AGENTBOX_DATABASE_URL"), "PostgreSQL URL (default: embedded cluster in --data-dir)")
	dataDir := fs.String("data-dir", ".agentbox", "directory for the embedded cluster and the generated admin token")
	var origins stringList
	fs.Var(&origins, "mcp-allowed-origin", "an Origin allowed on /mcp (repeatable; also AGENTBOX_MCP_ALLOWED_ORIGINS, comma-separated); by default every request carrying an Origin is refused")
	addrFile := fs.String("addr-file", "", "once listening, write the bound host:port to this file (for --addr 127.0.0.1:0)")
	uploadDir := fs.String("upload-dir", "", "directory for temporary upload files (default: uploads/ in --data-dir); files a crashed server left there are removed at start")
	pprofOn := fs.Bool("pprof", false, "serve Go profiles at /debug/pprof/ (benchmarking; unauthenticated, keep it off in production)")
	if err := parse(fs, args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	url := *dbURL
	if url == "" {
		logFile, err := os.OpenFile(filepath.Join(dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer logFile.Close()
		log.Info("starting embedded PostgreSQL", slog.String("data_dir", dir))
		cluster, err := pglocal.Start(ctx, pglocal.Options{DataDir: dir, Log: logFile})
		if err != nil {
			return fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				log.Error("stopping embedded PostgreSQL", slog.Any("err", err))
			}
		}()
		url = cluster.URL("agentbox")
	}
	token, tokenFile, err := adminToken(dir)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()

	if *uploadDir == "" {
		*uploadDir = filepath.Join(dir, "uploads")
	}
	uploads, err := upload.NewStager(*uploadDir)
	if err != nil {
		return err
	}
	defer uploads.Close()

	for _, o := range strings.Split(os.Getenv("AGENTBOX_MCP_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	handler := server.Handler(server.Config{
		Store:             st,
		Service:           service.New(service.Options{Store: st, Log: log}),
		AdminToken:        token,
		Log:               log,
		MCPAllowedOrigins: origins,
		// /metrics is unauthenticated unless AGENTBOX_METRICS_TOKEN is set.
		MetricsToken: os.Getenv("AGENTBOX_METRICS_TOKEN"),
		Uploads:      uploads,
	})
	if *pprofOn {
		handler = withPprof(handler)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *addrFile != "" {
		if err := writeAddrFile(*addrFile, ln.Addr().String()); err != nil {
			ln.Close()
			return err
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: httpserver.MaxListenerHeaderBytes}
	where := "http://" + ln.Addr().String()
	if tokenFile != "" {
		log.Info("agentbox listening", slog.String("url", where), slog.String("admin_token_file", tokenFile))
	} else {
		log.Info("agentbox listening", slog.String("url", where))
	}
	fmt.Fprintf(e.stderr, "agentbox: listening on %s\n", where)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// adminToken is AGENTBOX_ADMIN_TOKEN, or a token generated once and kept (0600) in the
// data directory so a newcomer can use the admin CLI without inventing one.
func adminToken(dir string) (token, file string, err error) {
	if t := os.Getenv("AGENTBOX_ADMIN_TOKEN"); t != "" {
		return t, "", nil
	}
	file = filepath.Join(dir, "admin-token")
	if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), file, nil
	}
	token = auth.NewSecret(auth.AdminTokenPrefix)
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("writing the admin token: %w", err)
	}
	return token, file, nil
}
