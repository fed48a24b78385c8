package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DBProfile is what PostgreSQL did per operation inside one measurement window: the
// difference of two snapshots taken at the window's ends (see observed).
type DBProfile struct {
	// WALBytesPerOp is the cluster's WAL growth (pg_current_wal_lsn) per operation; on a
	// shared server it includes other databases' writes.
	WALBytesPerOp float64 `json:"wal_bytes_per_op"`
	// StatementsPerOp counts top-level statements (pg_stat_statements calls, BEGIN and
	// COMMIT included) per operation: the round trips an operation costs when none are
	// pipelined, an upper bound otherwise. Nil without pg_stat_statements.
	StatementsPerOp *float64 `json:"statements_per_op,omitempty"`
	// Top lists the statements of the window by total execution time.
	Top []TopStatement `json:"top_statements,omitempty"`
	// CPU is the CPU time per operation in the window (nil where /proc could not be read).
	CPU *CPUPerOp `json:"cpu_ms_per_op,omitempty"`
}

// CPUPerOp is CPU time per operation, in milliseconds, over a measurement window. Machine
// counts every process of the machine (with --spawn and a local PostgreSQL: the database,
// the server and this load generator, plus whatever else runs there); Server and Client
// (this load generator, River's workers excluded: they run as their own process) are
// nil where they could not be read.
type CPUPerOp struct {
	Machine float64  `json:"machine"`
	Server  *float64 `json:"server,omitempty"`
	Client  *float64 `json:"client,omitempty"`
}

// cpuPerOp is the per-operation difference of two CPU readings.
func cpuPerOp(before, after cpuTimes, ops int64) *CPUPerOp {
	if ops <= 0 || !before.machineOK || !after.machineOK {
		return nil
	}
	ms := func(d time.Duration) *float64 {
		v := float64(d) / float64(time.Millisecond) / float64(ops)
		return &v
	}
	c := &CPUPerOp{Machine: *ms(after.machine - before.machine)}
	if before.serverOK && after.serverOK {
		c.Server = ms(after.server - before.server)
	}
	if before.clientOK && after.clientOK {
		c.Client = ms(after.client - before.client)
	}
	return c
}

// TopStatement is one pg_stat_statements entry over a window.
type TopStatement struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_ms"`
	MeanMs  float64 `json:"mean_ms"`
}

// topStatements is how many statements a profile lists.
const topStatements = 8

// stmtRow is one pg_stat_statements entry at a snapshot.
type stmtRow struct {
	query   string
	calls   int64
	totalMs float64
}

// enableStatements turns on pg_stat_statements in the benchmark database when the server
// preloads it (the embedded cluster does); otherwise it returns why the report has no
// per-statement figures.
func (h *harness) enableStatements(ctx context.Context) (note string) {
	var preload string
	if err := h.pool.QueryRow(ctx, "SHOW shared_preload_libraries").Scan(&preload); err != nil {
		return "pg_stat_statements not available: " + err.Error()
	}
	if !strings.Contains(preload, "pg_stat_statements") {
		return "pg_stat_statements not available: the PostgreSQL server does not preload it (shared_preload_libraries); the report has WAL bytes per operation but no statements (the embedded cluster of `make bench` preloads it)"
	}
	if _, err := h.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return "pg_stat_statements not available: CREATE EXTENSION failed: " + err.Error()
	}
	if _, err := h.pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		return "pg_stat_statements not available: " + err.Error()
	}
	h.statements = true
	return ""
}

// resetStatements clears pg_stat_statements between workloads, so one workload's entries
// never crowd out the next one's (pg_stat_statements.max) and each starts from zero.
func (h *harness) resetStatements(ctx context.Context) {
	if h.statements {
		if _, err := h.pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			h.prog.logf("bench: pg_stat_statements_reset: %v", err)
		}
	}
}

// statsQuery reads this database's statements, leaving out the harness's own snapshot
// queries (they read pg_stat_* views).
const statsQuery = `SELECT queryid, query, calls, total_exec_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
  AND query NOT LIKE '%pg_stat%' AND query NOT LIKE '%pg_current_wal_lsn%'`

// statsCountsQuery is statsQuery without the texts (cheap enough to read between two calls),
// so the harness's own queries are among its rows.
const statsCountsQuery = `SELECT queryid, '', calls, total_exec_time FROM pg_stat_statements(false)
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL`

// snapshotDB reads the WAL position and, when enabled, pg_stat_statements into c.
func (h *harness) snapshotDB(ctx context.Context, c *counters) {
	c.cpu = h.readCPU() // first: the queries below cost CPU of their own
	if h.pool == nil {
		return
	}
	h.readWAL(ctx, c)
	if h.statements {
		c.stmts = h.readStatements(ctx, statsQuery)
	}
}

// readWAL reads the WAL position into c.
func (h *harness) readWAL(ctx context.Context, c *counters) {
	if err := h.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8").Scan(&c.wal); err == nil {
		c.walOK = true
	}
}

// readStatements runs statsQuery or statsCountsQuery: the statements by queryid, nil when
// they could not be read.
func (h *harness) readStatements(ctx context.Context, query string) map[int64]stmtRow {
	rows, err := h.pool.Query(ctx, query)
	if err != nil {
		return nil
	}
	defer rows.Close()
	stmts := map[int64]stmtRow{}
	for rows.Next() {
		var id int64
		var r stmtRow
		if rows.Scan(&id, &r.query, &r.calls, &r.totalMs) == nil {
			stmts[id] = r
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return stmts
}

// dbProfile is the per-operation difference of two snapshots (nil when neither the WAL
// position nor the statements could be read).
func dbProfile(before, after counters, ops int64) *DBProfile {
	if ops <= 0 || !before.walOK || !after.walOK {
		return nil
	}
	n := float64(ops)
	p := &DBProfile{WALBytesPerOp: (after.wal - before.wal) / n, CPU: cpuPerOp(before.cpu, after.cpu, ops)}
	if before.stmts == nil || after.stmts == nil {
		return p
	}
	var calls int64
	var top []TopStatement
	for id, a := range after.stmts {
		b := before.stmts[id] // zero when the statement first ran inside the window
		d := TopStatement{Query: oneLine(a.query), Calls: a.calls - b.calls, TotalMs: a.totalMs - b.totalMs}
		if d.Calls <= 0 {
			continue
		}
		d.MeanMs = d.TotalMs / float64(d.Calls)
		calls += d.Calls
		top = append(top, d)
	}
	sort.Slice(top, func(i, j int) bool { return top[i].TotalMs > top[j].TotalMs })
	p.Top = top[:min(topStatements, len(top))]
	perOp := float64(calls) / n
	p.StatementsPerOp = &perOp
	return p
}

// profiled runs p and sets the result's DB profile from snapshots at the window's ends,
// for phases that need no other per-op diagnostics (W3; observed does both).
func (h *harness) profiled(ctx context.Context, p phase, op opFunc) (*phaseResult, error) {
	res, before, after, err := h.profiledCounters(ctx, p, op)
	if err == nil {
		res.DB = dbProfile(before, after, res.Ops)
	}
	return res, err
}

// profiledCounters runs p and returns the snapshots taken at its window's ends.
func (h *harness) profiledCounters(ctx context.Context, p phase, op opFunc) (res *phaseResult, before, after counters, err error) {
	var snapped sync.WaitGroup
	snapped.Add(2)
	measure := p.OnMeasure
	p.OnMeasure = func(ctx context.Context, w window) {
		snapCtx := context.WithoutCancel(ctx)
		h.snapshotDB(snapCtx, &before)
		snapped.Done()
		time.AfterFunc(time.Until(w.to), func() { h.snapshotDB(snapCtx, &after); snapped.Done() })
		if measure != nil {
			measure(ctx, w)
		}
	}
	res, err = p.run(ctx, h.prog, op)
	if err != nil {
		return res, before, after, err
	}
	if ctx.Err() != nil { // a cancelled run may end before the window opened
		return res, before, after, ctx.Err()
	}
	snapped.Wait()
	return res, before, after, nil
}

// pooledPhase is one line measured in several windows (W5's rounds): its operations,
// latency samples and the sum of each window's database and CPU differences.
type pooledPhase struct {
	res phaseResult
	sum counters // the windows' differences added up: dbProfile(zero, sum, ops)
}

func newPooledPhase() *pooledPhase { return &pooledPhase{sum: zeroCounters()} }

// zeroCounters is a snapshot of nothing yet counted, every figure readable.
func zeroCounters() counters {
	return counters{walOK: true, stmts: map[int64]stmtRow{}, cpu: cpuTimes{machineOK: true, serverOK: true, clientOK: true}}
}

// add pools one window's result and the snapshots at its ends.
func (p *pooledPhase) add(res *phaseResult, before, after counters) {
	p.res.Ops += res.Ops
	p.res.Requests += res.Requests
	p.res.Errors += res.Errors
	p.res.Elapsed += res.Elapsed
	p.res.Abandoned += res.Abandoned
	p.res.Samples = append(p.res.Samples, res.Samples...)
	for _, e := range res.FirstErrors {
		if len(p.res.FirstErrors) < 3 && !slices.Contains(p.res.FirstErrors, e) {
			p.res.FirstErrors = append(p.res.FirstErrors, e)
		}
	}
	s := &p.sum
	s.wal += after.wal - before.wal
	s.walOK = s.walOK && before.walOK && after.walOK
	if s.stmts != nil && before.stmts != nil && after.stmts != nil {
		for id, a := range after.stmts {
			b, acc := before.stmts[id], s.stmts[id]
			s.stmts[id] = stmtRow{query: a.query, calls: acc.calls + a.calls - b.calls, totalMs: acc.totalMs + a.totalMs - b.totalMs}
		}
	} else {
		s.stmts = nil
	}
	c, bc, ac := &s.cpu, before.cpu, after.cpu
	c.machine += ac.machine - bc.machine
	c.server += ac.server - bc.server
	c.client += ac.client - bc.client
	c.machineOK = c.machineOK && bc.machineOK && ac.machineOK
	c.serverOK = c.serverOK && bc.serverOK && ac.serverOK
	c.clientOK = c.clientOK && bc.clientOK && ac.clientOK
}

// result is the pooled phase, with its latency over every window's samples and its DB
// profile over the windows' summed differences.
func (p *pooledPhase) result() *phaseResult {
	res := p.res
	res.Latency = summarize(res.Samples)
	zero := zeroCounters()
	if p.sum.stmts == nil {
		zero.stmts = nil
	}
	res.DB = dbProfile(zero, p.sum, res.Ops)
	return &res
}

// oneLine collapses a statement's whitespace and shortens it for the report.
func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	const limit = 160
	if r := []rune(q); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return q
}

// markdownDBProfiles renders the per-workload statement section.
func (rep *Report) markdownDBProfiles(b *strings.Builder) {
	var any bool
	for _, r := range rep.Results {
		if r.Status == StatusOK && r.DB != nil {
			any = true
		}
	}
	if !any && rep.StatementsNote == "" {
		return
	}
	b.WriteString("\n## Database per operation\n\n")
	if rep.StatementsNote != "" {
		fmt.Fprintf(b, "%s.\n\n", rep.StatementsNote)
	} else {
		b.WriteString("From pg_stat_statements (reset before each workload) and pg_current_wal_lsn, read at both ends of each measurement window. Statements per op count top-level statements including BEGIN/COMMIT: round trips when none are pipelined. W6's lines, measured one call at a time in turn, are read between consecutive calls and pooled per line over its measured calls (no CPU figures there).\n\n")
	}
	for _, r := range rep.Results {
		if r.Status != StatusOK || r.DB == nil {
			continue
		}
		stmts := "statements not available"
		if r.DB.StatementsPerOp != nil {
			stmts = fmt.Sprintf("%.2f statements/op", *r.DB.StatementsPerOp)
		}
		fmt.Fprintf(b, "**%s** (%s): %.0f WAL bytes/op, %s%s\n\n", r.ID, r.Workload, r.DB.WALBytesPerOp, stmts, r.DB.CPU.markdown())
		if len(r.DB.Top) == 0 {
			continue
		}
		b.WriteString("| statement | calls | total ms | mean ms |\n|---|---:|---:|---:|\n")
		for _, t := range r.DB.Top {
			fmt.Fprintf(b, "| `%s` | %d | %.0f | %.3f |\n", mdEscape(strings.ReplaceAll(t.Query, "`", "'")), t.Calls, t.TotalMs, t.MeanMs)
		}
		b.WriteString("\n")
	}
}

// markdown renders the CPU figures for a profile's heading line ("" when not measured).
func (c *CPUPerOp) markdown() string {
	if c == nil {
		return ""
	}
	s := fmt.Sprintf("; CPU per op: machine %.3f ms", c.Machine)
	var parts []string
	if c.Server != nil {
		parts = append(parts, fmt.Sprintf("server %.3f", *c.Server))
	}
	if c.Client != nil {
		parts = append(parts, fmt.Sprintf("load generator %.3f", *c.Client))
	}
	if c.Server != nil && c.Client != nil {
		parts = append(parts, fmt.Sprintf("the rest (PostgreSQL and anything else running) %.3f", c.Machine-*c.Server-*c.Client))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
