// Package bench is Agentbox's load generator (`agentbox bench`, `make bench`). It prepares a
// box with agents and rooms through the real admin and agent APIs, runs the workloads of
// issue 7 with a configurable number of closed-loop clients, and reports throughput,
// latency percentiles, server memory and every target ratio as Markdown and JSON:
//
//	W0  raw pgx single-row INSERT commits/s on the same database (the baseline)
//	W1  message_send into a 10-member room, 1 KiB body: a first run on the fresh server, then warm
//	W2  DM round trip: send, the recipient inbox_list's and inbox_ack's it
//	W3  inbox_list and conversation_read latency with a small and a large history
//	W4  work distribution by 8 sessions of one agent with inbox_claim + inbox_ack: draining a
//	    pre-filled backlog, and live with producers (also with one session, as many claim
//	    loops as River's client has); each against River (tools/bench-river, a separate
//	    module) measured the same way on the same database
//	W5  transport overhead: the same read and write over HTTP, MCP streamable HTTP, MCP stdio
//	W6  growth: claim, ACK and inbox_list at 300 / 3k / 30k rows; send in a new vs a large box
//
// Where the database preloads pg_stat_statements, each measured window also reports its top
// statements, statements per operation and WAL bytes per operation (pgstat.go).
//
// Operations the server does not implement yet make their workload "not available" instead
// of failing the run, so the harness is useful while the product grows.
package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultW4Backlog is the W4 drain's backlog in the full run: large enough that River's
// drain, the faster one, runs over 10 s too (60k took it 7.8 s on the 2-core machine, 120k 8.9 s on a quieter day).
const DefaultW4Backlog = 250_000

// DefaultW4ClaimLimit is the rows per inbox_claim (and so per inbox_ack) in W4: River's
// producer fetches up to MaxWorkers (100) jobs at a time, and 100 is the product's default
// ack_batch_max, so a worker round moves the batch River's fetch does. (It was 50 until
// 2026-12-03: half River's batch, with every per-call cost, authentication, idempotency
// record, round trips, paid twice as often per item.)
const DefaultW4ClaimLimit = 100

// Workload names accepted by Config.Workloads.
var AllWorkloads = []string{"w0", "w1", "w2", "w3", "w4", "w5", "w6"}

// Config is one benchmark run.
type Config struct {
	// Spawn starts a fresh database and an `agentbox serve` subprocess for the run;
	// otherwise ServerURL/AdminToken name a running server.
	Spawn bool
	// ServerURL and AdminToken address a running server (not with Spawn).
	ServerURL  string
	AdminToken string
	// DatabaseURL: with Spawn, the PostgreSQL server to create the benchmark database on
	// (default: 127.0.0.1:5432 if it answers, else an embedded cluster); without Spawn,
	// the running server's database, needed by W0, W3 seeding and River (those are
	// "not available" without it).
	DatabaseURL string
	// Embedded forces the embedded PostgreSQL with Spawn.
	Embedded bool
	// ServerPID is the running server's process ID, for its RSS (not with Spawn).
	ServerPID int
	// ServerPoolMaxConns, with Spawn, sets the server's pool size (pool_max_conns in its
	// database URL); 0 keeps the product's default.
	ServerPoolMaxConns int
	// HostIP is the source address the server sees from this harness.
	HostIP string
	// AgentboxBin runs `serve` (Spawn) and `mcp` (W5 stdio); default: this executable.
	AgentboxBin string
	// RiverBin is the tools/bench-river binary; "" makes the River baseline not available.
	RiverBin string

	Clients   int
	Duration  time.Duration
	Warmup    time.Duration
	Workloads []string

	W1Rooms      int // rooms W1 spreads its clients over (default: one per client)
	W3Small      int
	W3Large      int
	W3Unread     int
	W3Clients    int // default: Clients
	W4Producers  int
	W4Sessions   int
	W4ClaimLimit int
	W4Backlog    int // items the W4 drain pre-fills (Agentbox and River alike)
	W5Clients    int

	// Pprof fetches server CPU profiles during W1, W4 and W5 into OutDir (the server must
	// serve /debug/pprof: Spawn starts it with --pprof).
	Pprof bool
	// OutDir receives latest.md, latest.json and profiles ("" = write nothing).
	OutDir string
	// Progress receives the progress display and setup lines (nil = silent).
	Progress io.Writer
	// Terminal shows progress bars instead of plain lines.
	Terminal bool
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.HostIP == "" {
		c.HostIP = "127.0.0.1"
	}
	if c.Clients <= 0 {
		c.Clients = 64
	}
	if c.Duration <= 0 {
		c.Duration = 20 * time.Second
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if len(c.Workloads) == 0 {
		c.Workloads = AllWorkloads
	}
	if c.W1Rooms <= 0 {
		c.W1Rooms = c.Clients
	}
	if c.W3Small <= 0 {
		c.W3Small = 10_000
	}
	if c.W3Large <= 0 {
		c.W3Large = 1_000_000
	}
	if c.W3Clients <= 0 {
		c.W3Clients = c.Clients
	}
	if c.W3Unread <= 0 {
		c.W3Unread = 1000
	}
	if c.W4Producers <= 0 {
		c.W4Producers = 8
	}
	if c.W4Sessions <= 0 {
		c.W4Sessions = 8
	}
	if c.W4ClaimLimit <= 0 {
		c.W4ClaimLimit = DefaultW4ClaimLimit
	}
	if c.W4Backlog <= 0 {
		c.W4Backlog = DefaultW4Backlog
	}
	if c.W5Clients <= 0 {
		c.W5Clients = 8
	}
}

func (c *Config) validate() error {
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			return fmt.Errorf("unknown workload %q (known: %s)", w, strings.Join(AllWorkloads, ","))
		}
	}
	if !c.Spawn && c.ServerURL == "" {
		return errors.New("no server: give a server URL or spawn one")
	}
	if c.W3Small >= c.W3Large {
		return fmt.Errorf("W3 small history (%d) must be below the large one (%d)", c.W3Small, c.W3Large)
	}
	if c.W3Unread > c.W3Small {
		return fmt.Errorf("W3 unread rows (%d) must not exceed the small history (%d)", c.W3Unread, c.W3Small)
	}
	return nil
}

// harness is the state of one run.
type harness struct {
	cfg        Config
	c          *client
	adminToken string
	dbURL      string        // "" when the database is not reachable
	pool       *pgxpool.Pool // the harness's own connections (W0, W3 seeding, statistics)
	serverPID  int           // 0 when unknown
	runID      string
	prog       *progress
	rep        *Report
	profiles   []string
	mu         sync.Mutex // guards profiles
	statements bool       // pg_stat_statements is enabled in the benchmark database
}

// Run executes the benchmark and returns its report (also written to OutDir when set).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	h := &harness{cfg: cfg, runID: randomHex(4), prog: &progress{w: cfg.Progress, tty: cfg.Terminal}}
	h.rep = &Report{GeneratedAt: began, Machine: machineInfo(), Run: RunInfo{
		Clients: cfg.Clients, DurationS: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(),
		Server: "external", ServerPool: "product default", W1Rooms: cfg.W1Rooms, W3Small: cfg.W3Small, W3Large: cfg.W3Large,
		W3Unread: cfg.W3Unread, W3Clients: cfg.W3Clients, W4Producers: cfg.W4Producers, W4Sessions: cfg.W4Sessions, W4ClaimLimit: cfg.W4ClaimLimit, W4Backlog: cfg.W4Backlog,
		W5Clients: cfg.W5Clients, Workloads: strings.Join(cfg.Workloads, ","),
	}}
	pgSource := "external"
	if cfg.Spawn {
		srv, err := spawn(ctx, cfg, h.prog)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := srv.stop(); err != nil {
				h.prog.logf("bench: cleanup: %v", err)
			}
		}()
		cfg.ServerURL, h.adminToken, h.dbURL, h.serverPID = srv.baseURL, srv.adminToken, srv.dbURL, srv.pid
		h.rep.Run.Server = "subprocess"
		pgSource = srv.dbSource
		if cfg.ServerPoolMaxConns > 0 {
			h.rep.Run.ServerPool = fmt.Sprint(cfg.ServerPoolMaxConns)
		}
	} else {
		h.adminToken, h.dbURL, h.serverPID = cfg.AdminToken, cfg.DatabaseURL, cfg.ServerPID
	}
	h.cfg = cfg
	h.c = newClient(cfg.ServerURL, 2*cfg.Clients+32)
	if err := h.waitReady(ctx); err != nil {
		return nil, err
	}
	// Every workload prepares its box through the admin API: a refused token ends the run.
	if err := h.c.admin(ctx, h.adminToken, "admin_box_list", "GET", "/boxes", nil, nil); err != nil {
		return nil, fmt.Errorf("checking the admin token: %w", err)
	}
	if m, err := h.scrapeMetrics(ctx); err == nil {
		if v, ok := m[`agentbox_db_pool_connections{state="max"}`]; ok {
			h.rep.Run.ServerPool = fmt.Sprintf("%.0f (%s)", v, h.rep.Run.ServerPool)
		}
	}
	if h.dbURL != "" {
		pcfg, err := pgxpool.ParseConfig(h.dbURL)
		if err != nil {
			return nil, fmt.Errorf("database URL: %w", err)
		}
		pcfg.MaxConns = int32(cfg.Clients + 4)
		h.pool, err = pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, err
		}
		defer h.pool.Close()
		h.rep.Postgres = postgresInfo(ctx, h.pool, pgSource)
		if note := h.enableStatements(ctx); note != "" {
			h.prog.logf("bench: %s", note)
			h.rep.StatementsNote = note
		}
		if note := connectionHeadroom(ctx, h.pool, cfg); note != "" {
			h.prog.logf("bench: warning: %s", note)
			h.rep.Notes = append(h.rep.Notes, note)
		}
	} else {
		h.rep.Notes = append(h.rep.Notes, "no database URL: W0, W3 and the River baseline need one (agentbox bench -database-url)")
		h.rep.StatementsNote = "pg_stat_statements and WAL figures not available: no database URL"

	}

	steps := []struct {
		name string
		run  func(context.Context) []Result
	}{
		{"w0", h.w0}, {"w1", h.w1}, {"w2", h.w2}, {"w3", h.w3}, {"w4", h.w4}, {"w5", h.w5}, {"w6", h.w6},
	}
	for _, s := range steps {
		if !slices.Contains(cfg.Workloads, s.name) {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		h.resetStatements(ctx)
		results := s.run(ctx)
		for _, r := range results {
			if r.Status != StatusOK {
				h.prog.logf("%s: %s", r.Workload, statusText(r))
			}
		}
		h.rep.Results = append(h.rep.Results, results...)
	}
	h.rep.ComputeTargets()
	h.rep.Run.Profiles = h.profiles
	h.rep.Run.TotalSeconds = time.Since(began).Seconds()
	h.rep.Notes = append(h.rep.Notes,
		"figures are from one run on a machine whose cores are shared by the server, PostgreSQL and this load generator; compare ratios, not absolute numbers, across machines",
		"throughput counts operations completed inside the measurement window; latency is per operation as the client sees it (closed loop, so it includes queueing at the server)")
	if cfg.OutDir != "" {
		md, js, err := h.rep.WriteFiles(cfg.OutDir)
		if err != nil {
			return h.rep, err
		}
		h.prog.logf("bench: wrote %s and %s", md, js)
	}
	return h.rep, nil
}

// failed turns a workload error into its report line.
func failed(id, label string, err error) Result {
	if na, ok := errorsAsNotAvailable(err); ok {
		return Result{ID: id, Workload: label, Status: StatusNotAvailable, Note: na.Error()}
	}
	return Result{ID: id, Workload: label, Status: StatusFailed, Note: err.Error()}
}

func (h *harness) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := h.c.do(ctx, "readyz", "GET", "/readyz", "", "", nil, nil)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s not ready: %w", h.c.base, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createBox creates a box with one host for the harness's source address.
func (h *harness) createBox(ctx context.Context, key string) error {
	if err := h.c.admin(ctx, h.adminToken, "admin_box_create", "POST", "/boxes", map[string]any{"box_key": key, "name": "benchmark " + key}, nil); err != nil {
		return err
	}
	return h.c.admin(ctx, h.adminToken, "admin_host_create", "POST", "/boxes/"+key+"/hosts",
		map[string]any{"name": "bench", "ips": []string{h.cfg.HostIP}}, nil)
}

// createAgents creates n agents named prefix-NNNN in box (in parallel) and primes each.
func (h *harness) createAgents(ctx context.Context, box, prefix string, n int) ([]*agent, error) {
	agents := make([]*agent, n)
	err := parallel(ctx, n, 8, func(ctx context.Context, i int) error {
		var out struct {
			Agent struct {
				AgentID string `json:"agent_id"`
			} `json:"agent"`
			APIKey string `json:"api_key"`
		}
		name := fmt.Sprintf("%s-%04d", prefix, i)
		if err := h.c.admin(ctx, h.adminToken, "admin_agent_create", "POST", "/boxes/"+box+"/agents",
			map[string]any{"host_name": "bench", "name": name}, &out); err != nil {
			return err
		}
		a := &agent{Box: box, ID: out.Agent.AgentID, Name: name, Key: out.APIKey}
		if _, err := h.c.prime(ctx, a); err != nil {
			return err
		}
		agents[i] = a
		return nil
	})
	return agents, err
}

// createRoom makes owner create a room inviting members, and each member join it.
func (h *harness) createRoom(ctx context.Context, name string, owner *agent, members []*agent) (string, error) {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	var room struct {
		RoomID string `json:"room_id"`
	}
	if err := h.c.call(ctx, owner, "room_create", "POST", "/rooms", map[string]any{
		"name": name, "invitee_agent_ids": ids, "default_follow": "all", "idempotency_key": "create-" + name,
	}, &room); err != nil {
		return "", err
	}
	for _, m := range members {
		if err := h.c.call(ctx, m, "room_join", "POST", "/rooms/"+room.RoomID+"/join",
			map[string]any{"idempotency_key": "join-" + room.RoomID}, nil); err != nil {
			return "", err
		}
	}
	return room.RoomID, nil
}

// primeSessions primes one session header per client of the agent.
func (h *harness) primeSessions(ctx context.Context, a *agent, prefix string, n int) ([]*agent, error) {
	out := make([]*agent, n)
	err := parallel(ctx, n, 8, func(ctx context.Context, i int) error {
		s := a.withSession(fmt.Sprintf("%s-%d", prefix, i+1))
		if _, err := h.c.prime(ctx, s); err != nil {
			return err
		}
		out[i] = s
		return nil
	})
	return out, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

func machineInfo() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAverage = strings.Join(f[:3], " ")
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// postgresSettings are the settings the report names (they decide what a commit costs).
var postgresSettings = []string{
	"shared_buffers", "synchronous_commit", "fsync", "full_page_writes", "wal_level", "max_connections",
	"work_mem", "commit_delay", "wal_sync_method", "max_wal_size", "checkpoint_timeout", "effective_cache_size",
}

func postgresInfo(ctx context.Context, pool *pgxpool.Pool, source string) *Postgres {
	pg := &Postgres{Source: source, Settings: map[string]string{}}
	pool.QueryRow(ctx, "SHOW server_version").Scan(&pg.Version) //nolint:errcheck
	for _, s := range postgresSettings {
		var v string
		if err := pool.QueryRow(ctx, "SHOW "+s).Scan(&v); err == nil {
			pg.Settings[s] = v
		}
	}
	return pg
}

// connectionHeadroom warns when the PostgreSQL server may run out of connections: W0 holds
// one per client, River one per producer plus ten, next to the server's own pool and
// whatever else uses the server (a shared 127.0.0.1:5432 also serves `make test`).
func connectionHeadroom(ctx context.Context, pool *pgxpool.Pool, cfg Config) string {
	var maxConns, inUse int
	if err := pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int, (SELECT count(*) FROM pg_stat_activity)`).
		Scan(&maxConns, &inUse); err != nil {
		return ""
	}
	need := max(cfg.Clients, cfg.W4Producers+10) + 4 /* harness */ + max(cfg.ServerPoolMaxConns, 4)
	if free := maxConns - inUse; need > free {
		return fmt.Sprintf("PostgreSQL has %d free connections (max_connections %d, %d in use) and the run needs about %d: lower -clients or use another server", free, maxConns, inUse, need)
	}
	return ""
}

// profileTop runs `go tool pprof -top` on a profile when the go command is available.
func profileTop(ctx context.Context, path string) string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "tool", "pprof", "-top", "-nodecount=30", path).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// profileDuring returns an OnMeasure hook that saves a server CPU profile covering the
// measurement window as OutDir/name, and a func that waits for it (nil hook when
// profiling is off).
func (h *harness) profileDuring(name string) (func(context.Context, window), func()) {
	if !h.cfg.Pprof || h.cfg.OutDir == "" {
		return nil, func() {}
	}
	var started atomic.Bool
	done := make(chan struct{})
	on := func(ctx context.Context, w window) {
		started.Store(true)
		defer close(done)
		h.fetchProfile(ctx, w, name)
	}
	return on, func() {
		if started.Load() {
			<-done
		}
	}
}

// fetchProfile saves a CPU profile of the server covering the rest of the window.
func (h *harness) fetchProfile(ctx context.Context, w window, name string) {
	secs := max(1, int(time.Until(w.to).Round(time.Second).Seconds()))
	// The phase cancels its context when its window closes, which is when the profile
	// arrives: the request outlives it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(secs+30)*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", h.c.base, secs)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.prog.logf("bench: profile %s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.prog.logf("bench: profile %s: HTTP %d (start the server with --pprof)", name, resp.StatusCode)
		return
	}
	path := filepath.Join(h.cfg.OutDir, name)
	if err := os.MkdirAll(h.cfg.OutDir, 0o755); err != nil {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		h.prog.logf("bench: profile %s: %v", name, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		h.prog.logf("bench: profile %s: %v", name, err)
		return
	}
	h.mu.Lock()
	h.profiles = append(h.profiles, path)
	h.mu.Unlock()
}
