// Package server wires every transport around one service, the same way for
// `agentbox serve` and for tests: the HTTP API (with /docs, /metrics, health), MCP over
// streamable HTTP at /mcp, and the admin web UI at /admin.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/internal/adminui"
	"github.com/agentbox/agentbox/internal/auth"
	"github.com/agentbox/agentbox/internal/httpserver"
	"github.com/agentbox/agentbox/internal/mcpserver/mcphttp"
	"github.com/agentbox/agentbox/internal/metrics"
	"github.com/agentbox/agentbox/internal/service"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/upload"
)

// Config is what the root handler needs.
type Config struct {
	Store      *store.Store
	Service    *service.Service
	AdminToken string // AGENTBOX_ADMIN_TOKEN ("" accepts only issued admin tokens)
	Log        *slog.Logger
	// MCPAllowedOrigins are the Origin values /mcp accepts (empty refuses any present Origin).
	MCPAllowedOrigins []string
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// Uploads stages multipart uploads (nil: uploads are refused).
	Uploads *upload.Stager
	// Version is reported to MCP clients at initialization.
	Version string
	// BodyIdleTimeout bounds a request body's pauses (0: httpserver.DefaultBodyIdleTimeout).
	BodyIdleTimeout time.Duration
}

// Handler returns the root handler.
func Handler(cfg Config) http.Handler {
	authn := auth.New(cfg.Store, cfg.AdminToken, cfg.Log)
	reg := metrics.New(cfg.Store.Pool())
	reg.SetCleanup(cleanupJobs(cfg.Store))
	var uploads *httpserver.UploadConfig
	if cfg.Uploads != nil {
		uploads = &httpserver.UploadConfig{Stager: cfg.Uploads, Limits: cfg.Service.UploadLimits}
	}
	ui := adminui.New(adminui.Config{Service: cfg.Service, Auth: authn, Log: cfg.Log, Metrics: reg, Sessions: cfg.Store})
	return httpserver.New(httpserver.Config{
		Service: cfg.Service,
		Auth:    authn,
		Ready:   cfg.Store.Ready,
		Log:     cfg.Log,
		Extra: map[string]http.Handler{
			"/mcp": mcphttp.New(mcphttp.Config{Service: cfg.Service, Auth: authn, AllowedOrigins: cfg.MCPAllowedOrigins, Version: cfg.Version, Log: cfg.Log, Metrics: reg}),
			// The admin web UI; the JSON API's routes under /admin/api/ stay more specific.
			"/admin":  ui,
			"/admin/": ui,
		},
		Metrics:         reg,
		MetricsToken:    cfg.MetricsToken,
		BodyIdleTimeout: cfg.BodyIdleTimeout,
		Uploads:         uploads,
	})
}

// cleanupJobs reports the cleanup jobs on /metrics (SPEC §13.3): this process's sweeper of
// expired idempotency records, and retention as the boxes' cleanup status holds it (read at
// each scrape within store.MetricsTimeout; unknown while the database does not answer).
func cleanupJobs(st *store.Store) metrics.CleanupSource {
	return func(ctx context.Context) []metrics.CleanupJob {
		e := st.IdempotencyExpiryStats()
		jobs := []metrics.CleanupJob{{Job: "idempotency_expiry", Known: true, Runs: e.Runs, Failures: e.Failures,
			Deleted: e.Deleted, LastSuccess: e.LastSuccess}}
		retention := metrics.CleanupJob{Job: "retention"}
		if t, err := st.CleanupTotals(ctx); err == nil {
			retention = metrics.CleanupJob{Job: "retention", Known: true, Runs: t.Runs, Failures: t.Failures,
				Deleted: t.DeletedMessages, LastSuccess: t.LastSuccess, BoxesFailed: &t.BoxesFailed}
		}
		return append(jobs, retention)
	}
}
