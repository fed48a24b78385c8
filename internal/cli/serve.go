package cli

import (
	"flag"
	"net"
	"os"
	"strings"

	"github.com/agentbox/agentbox/internal/mcpserver"
	"github.com/agentbox/agentbox/internal/server"
)

// serveUsage heads `agentbox serve --help`: the flags follow it. Every environment variable
// serve reads is listed here and in README ("Running the server").
const serveUsage = `usage: agentbox serve [flags]

Runs the Agentbox server (HTTP API, /mcp, the admin UI at /admin, /metrics) until SIGINT,
SIGTERM or SIGHUP. Without --database-url it runs an embedded PostgreSQL cluster in --data-dir.

environment:
  AGENTBOX_DATABASE_URL         the PostgreSQL URL, as --database-url (the flag wins)
  AGENTBOX_ADMIN_TOKEN          the admin token (admin CLI, admin API and UI); unset: one is generated once and kept in <--data-dir>/admin-token
                                several instances on one database (--database-url) need the same AGENTBOX_ADMIN_TOKEN
  AGENTBOX_METRICS_TOKEN        when set, /metrics requires "Authorization: Bearer <token>"; unset: /metrics answers anyone
  AGENTBOX_MCP_ALLOWED_ORIGINS  Origins allowed on /mcp, comma-separated, added to --mcp-allowed-origin
  AGENTBOX_PG_BINDIR            the embedded cluster's PostgreSQL binaries (initdb, pg_ctl, postgres); unset: initdb on PATH, else the newest /usr/lib/postgresql/*/bin
  GOGC, GOMEMLIMIT              the Go collector; unset: GOGC=400 under a 512 MiB soft memory limit
`

// serve parses `agentbox serve` and runs the server (internal/server) until a shutdown
// signal (SIGINT, SIGTERM, SIGHUP).
func (e *env) serve(args []string) error {
	fs := flag.NewFlagSet("agentbox serve", flag.ContinueOnError)
	cfg := server.RunConfig{Stderr: e.stderr}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("AGENTBOX_DATABASE_URL"), "PostgreSQL URL of an existing database (several instances may share it)")
	fs.StringVar(&cfg.DataDir, "data-dir", ".agentbox", "directory for the embedded cluster, its log and the generated admin token (one server at a time)")
	var origins stringList
	fs.Var(&origins, "mcp-allowed-origin", "an Origin allowed on /mcp (repeatable; also AGENTBOX_MCP_ALLOWED_ORIGINS, comma-separated); by default every request carrying an Origin is refused")
	fs.StringVar(&cfg.AddrFile, "addr-file", "", "once listening, write the bound host:port to this file (for --addr 127.0.0.1:0)")
	fs.StringVar(&cfg.UploadDir, "upload-dir", "", "directory for temporary upload files (default: uploads/ in --data-dir); files a crashed server left there are removed at start")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles at /debug/pprof/ (benchmarking; unauthenticated, keep it off in production)")
	// The URL's default is the environment's, which may hold a password: --help never shows it.
	notes := map[string]string{"database-url": "default: AGENTBOX_DATABASE_URL, else the embedded cluster"}
	if err := parseDescribed(fs, args, serveUsage, notes); err != nil {
		return err
	}
	for _, o := range strings.Split(os.Getenv("AGENTBOX_MCP_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	cfg.MCPAllowedOrigins = origins
	// Checked before anything starts (exit 2): a listen address that cannot be, and an admin
	// token the admin CLI could never send (it trims the value, then refuses anything but
	// visible ASCII; the server compares the trimmed value).
	if _, port, err := net.SplitHostPort(cfg.Addr); err != nil || !validPort(port) {
		return usagef("--addr must be host:port with a port from 0 to 65535 (e.g. 127.0.0.1:8080 or :8080)")
	}
	cfg.AdminToken = strings.TrimSpace(os.Getenv("AGENTBOX_ADMIN_TOKEN"))
	if cfg.AdminToken != "" && !mcpserver.ValidKey(cfg.AdminToken) {
		return errBadAdminToken
	}
	cfg.MetricsToken = os.Getenv("AGENTBOX_METRICS_TOKEN")
	return server.Run(cfg)
}

// validPort: a decimal port number net.Listen takes (0 picks one), or a service name it knows.
func validPort(port string) bool {
	_, err := net.LookupPort("tcp", port)
	return err == nil
}
