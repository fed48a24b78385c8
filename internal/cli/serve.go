package cli

import (
	"flag"
	"os"
	"strings"

	"github.com/agentbox/agentbox/internal/server"
)

// serve parses `agentbox serve` and runs the server (internal/server) until a shutdown
// signal (SIGINT, SIGTERM, SIGHUP).
func (e *env) serve(args []string) error {
	fs := flag.NewFlagSet("agentbox serve", flag.ContinueOnError)
	cfg := server.RunConfig{Stderr: e.stderr}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("AGENTBOX_DATABASE_URL"), "PostgreSQL URL (env AGENTBOX_DATABASE_URL; default: the embedded cluster in --data-dir)")
	fs.StringVar(&cfg.DataDir, "data-dir", ".agentbox", "directory for the embedded cluster, its log and the generated admin token (one server at a time)")
	var origins stringList
	fs.Var(&origins, "mcp-allowed-origin", "an Origin allowed on /mcp (repeatable; also AGENTBOX_MCP_ALLOWED_ORIGINS, comma-separated); by default every request carrying an Origin is refused")
	fs.StringVar(&cfg.AddrFile, "addr-file", "", "once listening, write the bound host:port to this file (for --addr 127.0.0.1:0)")
	fs.StringVar(&cfg.UploadDir, "upload-dir", "", "directory for temporary upload files (default: uploads/ in --data-dir); files a crashed server left there are removed at start")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles at /debug/pprof/ (benchmarking; unauthenticated, keep it off in production)")
	if err := parse(fs, args); err != nil {
		return err
	}
	for _, o := range strings.Split(os.Getenv("AGENTBOX_MCP_ALLOWED_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	cfg.MCPAllowedOrigins = origins
	cfg.AdminToken = os.Getenv("AGENTBOX_ADMIN_TOKEN")
	cfg.MetricsToken = os.Getenv("AGENTBOX_METRICS_TOKEN")
	return server.Run(cfg)
}
