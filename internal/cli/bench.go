package cli

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/bench"
)

// bench runs the load generator (internal/bench) against a running server, or with
// --spawn against a fresh database and server subprocess of its own (what `make bench`
// does). Progress goes to stderr, the report JSON to stdout, and latest.md/latest.json
// to --out.
func (e *env) bench(args []string) error {
	fs := flag.NewFlagSet("agentbox bench", flag.ContinueOnError)
	var cfg bench.Config
	fs.BoolVar(&cfg.Spawn, "spawn", false, "create a fresh database and start `agentbox serve` on it as a subprocess (make bench)")
	fs.StringVar(&cfg.ServerURL, "server", serverURL(), "running server to measure (without --spawn); env AGENTBOX_SERVER, admin token from AGENTBOX_ADMIN_TOKEN")
	fs.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("AGENTBOX_BENCH_DATABASE_URL"),
		"with --spawn: PostgreSQL server to create the benchmark database on (default 127.0.0.1:5432 if it answers, else embedded); without: the server's database, for W0, W3 and River")
	fs.BoolVar(&cfg.Embedded, "embedded", false, "with --spawn: always use an embedded PostgreSQL cluster")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "process ID of the running server, for its peak RSS (without --spawn)")
	fs.IntVar(&cfg.ServerPoolMaxConns, "server-pool", 0, "with --spawn: the server's database pool size (pool_max_conns); 0 keeps the product default")
	fs.StringVar(&cfg.HostIP, "host-ip", "127.0.0.1", "source IP the server sees from this machine (registered as the benchmark host)")
	fs.StringVar(&cfg.AgentboxBin, "agentbox", "", "agentbox binary for serve and mcp subprocesses (default: this one)")
	fs.StringVar(&cfg.RiverBin, "river", "", "tools/bench-river binary for the River baseline (default: bench-river next to this binary)")
	fs.IntVar(&cfg.Clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&cfg.Duration, "duration", defaultBenchDuration, "measured duration of each phase")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultBenchWarmup, "unmeasured warm-up before each phase")
	workloads := fs.String("workloads", strings.Join(bench.AllWorkloads, ","), "comma-separated subset of "+strings.Join(bench.AllWorkloads, ","))
	fs.IntVar(&cfg.W1Rooms, "w1-rooms", 0, "W1: rooms the clients send into (default: one room per client)")
	fs.IntVar(&cfg.W3Small, "w3-small", 10_000, "W3: the small history, in messages")
	fs.IntVar(&cfg.W3Large, "w3-large", 1_000_000, "W3: the large history, in messages")
	fs.IntVar(&cfg.W3Unread, "w3-unread", 1000, "W3: unread rows left in the reader's inbox at each size")
	fs.IntVar(&cfg.W3Clients, "w3-clients", 0, "W3: concurrent readers (default: --clients; a few show the read's own latency without queueing)")
	fs.IntVar(&cfg.W4Producers, "w4-producers", 8, "W4: producers (the same number for River)")
	fs.IntVar(&cfg.W4Sessions, "w4-sessions", 8, "W4: sessions of the worker agent claiming and ACKing")
	fs.IntVar(&cfg.W4ClaimLimit, "w4-claim", bench.DefaultW4ClaimLimit, "W4: rows per inbox_claim and inbox_ack (River fetches up to its MaxWorkers, 100)")
	fs.IntVar(&cfg.W4Backlog, "w4-backlog", bench.DefaultW4Backlog, "W4 drain: items pre-filled before the sessions (and River's workers) empty them (the full run drains for well over 10 s)")
	fs.IntVar(&cfg.W5Clients, "w5-clients", 8, "W5: clients per transport")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "fetch server CPU profiles during W1, W4 and W5 into --out (--spawn starts the server with --pprof)")
	fs.BoolVar(&cfg.Pprof, "cpuprofile", false, "same as --pprof")
	fs.StringVar(&cfg.OutDir, "out", filepath.Join("bench", "results"), "directory for latest.md, latest.json and profiles (\"\" writes nothing)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg.Workloads = strings.Split(strings.ReplaceAll(*workloads, " ", ""), ",")
	cfg.AdminToken = os.Getenv("AGENTBOX_ADMIN_TOKEN")
	if !cfg.Spawn && cfg.AdminToken == "" {
		return usagef("AGENTBOX_ADMIN_TOKEN is required to prepare boxes on a running server (or use --spawn)")
	}
	if cfg.RiverBin == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "bench-river"); fileExists(p) {
				cfg.RiverBin = p
			}
		}
	}
	cfg.Progress = e.stderr
	if f, ok := e.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cfg.Terminal = true
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(js)
	return err
}

const (
	defaultBenchDuration = 20 * time.Second
	defaultBenchWarmup   = 2 * time.Second
)

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
