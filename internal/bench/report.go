package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Result statuses.
const (
	StatusOK           = "ok"
	StatusNotAvailable = "not_available"
	StatusFailed       = "failed"
)

// Target statuses.
const (
	TargetMet          = "met"
	TargetMissed       = "missed"
	TargetNotAvailable = "not_available"
)

// Result is one measured line of the report.
type Result struct {
	ID       string `json:"id"`       // stable key, e.g. "W1", "W3.inbox_list.large"
	Workload string `json:"workload"` // human label
	Status   string `json:"status"`
	Note     string `json:"note,omitempty"`
	// Throughput is in Unit (messages/s, round trips/s, items/s, commits/s, requests/s).
	Throughput float64 `json:"throughput"`
	Unit       string  `json:"unit"`
	// RequestsPerS counts HTTP requests to the server (0 where not an API workload).
	RequestsPerS float64 `json:"requests_per_s"`
	Ops          int64   `json:"ops"`
	Errors       int64   `json:"errors"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MeanMs       float64 `json:"mean_ms"`
	Clients      int     `json:"clients"`
	DurationS    float64 `json:"duration_s"`
	// RSSPeakMiB is the server's peak resident set during the workload (0: not measured).
	RSSPeakMiB float64 `json:"rss_peak_mib,omitempty"`
	// Extra holds per-workload diagnostics (commits per op, rows per op, pool waits …).
	Extra map[string]float64 `json:"extra,omitempty"`
	// API marks workloads that count toward the request-rate target.
	API bool `json:"api"`
	// DB is what PostgreSQL did per operation in the window (nil where not measured).
	DB *DBProfile `json:"db,omitempty"`
}

// fromPhase fills the measured fields of r from a phase result. A phase in which no
// operation completed failed, whatever it counted.
func (r Result) fromPhase(p *phaseResult, clients int) Result {
	r.Status = StatusOK
	var notes []string
	if p.Ops == 0 {
		r.Status = StatusFailed
		notes = append(notes, "no operation completed inside the window")
	}
	if p.Abandoned > 0 {
		notes = append(notes, fmt.Sprintf("%d operations still running %s after the window were abandoned", p.Abandoned, abandonAfter))
	}
	if len(p.FirstErrors) > 0 {
		notes = append(notes, "errors: "+strings.Join(p.FirstErrors, "; "))
	}
	if len(notes) > 0 && r.Note == "" {
		r.Note = strings.Join(notes, "; ")
	}
	r.Ops, r.Errors = p.Ops, p.Errors
	r.Throughput = p.perSecond()
	if r.API {
		r.RequestsPerS = perSecond(p.Requests, p.Elapsed)
	}
	r.P50Ms, r.P99Ms, r.MeanMs = ms(p.Latency.P50), ms(p.Latency.P99), ms(p.Latency.Mean)
	r.Clients = clients
	r.DurationS = p.Elapsed.Seconds()
	r.DB = p.DB
	return r
}

// Target is one goal of the issue, evaluated from the results of the same run.
type Target struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Value       *float64 `json:"value"` // nil when not available
	Comparator  string   `json:"comparator"`
	Threshold   float64  `json:"threshold"`
	Unit        string   `json:"unit,omitempty"`
	Status      string   `json:"status"`
	Note        string   `json:"note,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	Cores     int    `json:"cores"`
	CPUModel  string `json:"cpu_model,omitempty"`
	OS        string `json:"os"`
	GoVersion string `json:"go_version"`
	Hostname  string `json:"hostname,omitempty"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures when the run began: a
	// value near or above Cores means other work shared the machine.
	LoadAverage string `json:"load_average,omitempty"`
}

// Postgres describes the database server used.
type Postgres struct {
	Version  string            `json:"version"`
	Source   string            `json:"source"` // embedded, local 127.0.0.1:5432, URL, external
	Settings map[string]string `json:"settings"`
}

// RunInfo are the parameters of the run.
type RunInfo struct {
	Clients      int      `json:"clients"`
	DurationS    float64  `json:"duration_s"`
	WarmupS      float64  `json:"warmup_s"`
	Server       string   `json:"server"` // subprocess, external
	ServerPool   string   `json:"server_pool_max_conns"`
	W1Rooms      int      `json:"w1_rooms"`
	W3Small      int      `json:"w3_small_history"`
	W3Large      int      `json:"w3_large_history"`
	W3Unread     int      `json:"w3_unread"`
	W3Clients    int      `json:"w3_clients"`
	W4Producers  int      `json:"w4_producers"`
	W4Sessions   int      `json:"w4_sessions"`
	W4ClaimLimit int      `json:"w4_claim_limit"`
	W4Backlog    int      `json:"w4_backlog"`
	W5Clients    int      `json:"w5_clients"`
	Workloads    string   `json:"workloads"`
	Profiles     []string `json:"profiles,omitempty"`
	TotalSeconds float64  `json:"total_s"`
}

// Report is the whole output of one run.
type Report struct {
	GeneratedAt time.Time `json:"generated_at"`
	Run         RunInfo   `json:"run"`
	Machine     Machine   `json:"machine"`
	Postgres    *Postgres `json:"postgres,omitempty"`
	Results     []Result  `json:"results"`
	Targets     []Target  `json:"targets"`
	Notes       []string  `json:"notes,omitempty"`
	// StatementsNote says why the report has no pg_stat_statements figures ("" when it has them).
	StatementsNote string `json:"statements_note,omitempty"`
	// ProfileTop is `go tool pprof -top` of the W1 server CPU profile, when taken.
	ProfileTop string `json:"profile_top,omitempty"`
}

// The targets.
const (
	targetW1OverW0     = 0.08 // W1 first run and warm run, each vs W0 of the same run
	targetW3Growth     = 1.5
	targetW4Drain      = 1.0 // W4 drain items/s vs River drain items/s
	targetW4Live       = 0.5 // W4 live items/s (with producers) vs River live items/s
	targetW5MCPHTTP    = 1.5
	targetRSSMiB       = 200
	targetW6Growth     = 1.3  // W6 claim, ACK and inbox_list p50 at the largest history vs the smallest
	targetW6Send       = 1.2  // W6 send p50, new box vs large box, either way
	targetRequestsPerS = 3000 // 30 × the original 100 requests/s
)

func (rep *Report) result(id string) *Result {
	for i := range rep.Results {
		if rep.Results[i].ID == id {
			return &rep.Results[i]
		}
	}
	return nil
}

func ok(r *Result) bool { return r != nil && r.Status == StatusOK }

// newTarget evaluates value against threshold; a NaN or missing value is not available.
func newTarget(id, desc, cmp string, threshold float64, unit string, value float64, available bool, note string) Target {
	t := Target{ID: id, Description: desc, Comparator: cmp, Threshold: threshold, Unit: unit, Note: note}
	if !available || math.IsNaN(value) || math.IsInf(value, 0) {
		t.Status = TargetNotAvailable
		return t
	}
	v := value
	t.Value = &v
	met := v >= threshold
	if cmp == "<=" {
		met = v <= threshold
	}
	t.Status = TargetMissed
	if met {
		t.Status = TargetMet
	}
	return t
}

// missing names what a ratio lacks, for a not-available target's note.
func missing(rs ...*Result) string {
	var parts []string
	for _, r := range rs {
		if r != nil && r.Status != StatusOK {
			s := r.ID + " " + r.Status
			if r.Note != "" {
				s += " (" + r.Note + ")"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}

// ComputeTargets evaluates every target of the issue from rep.Results.
func (rep *Report) ComputeTargets() {
	var ts []Target
	w0 := rep.result("W0")
	for _, c := range []struct{ id, target, run string }{{"W1.first", "w1_first_over_w0", "first run"}, {"W1", "w1_over_w0", "warm"}} {
		w1 := rep.result(c.id)
		desc := fmt.Sprintf("W1 room send, %s, ≥ 0.08 × W0 raw insert commits/s", c.run)
		if ok(w0) && ok(w1) {
			ts = append(ts, newTarget(c.target, desc, ">=", targetW1OverW0, "×", ratio(w1.Throughput, w0.Throughput), true, ""))
		} else {
			ts = append(ts, newTarget(c.target, desc, ">=", targetW1OverW0, "×", 0, false, missing(w0, w1)))
		}
	}
	for _, op := range []string{"inbox_list", "conversation_read"} {
		small, large := rep.result("W3."+op+".small"), rep.result("W3."+op+".large")
		desc := fmt.Sprintf("W3 %s p50 at %s history ≤ 1.5 × at %s", op, countLabel(rep.Run.W3Large), countLabel(rep.Run.W3Small))
		if ok(small) && ok(large) {
			ts = append(ts, newTarget("w3_"+op+"_growth", desc, "<=", targetW3Growth, "×", ratio(large.P50Ms, small.P50Ms), true,
				fmt.Sprintf("p99 ratio %.2f", ratio(large.P99Ms, small.P99Ms))))
		} else {
			ts = append(ts, newTarget("w3_"+op+"_growth", desc, "<=", targetW3Growth, "×", 0, false, missing(small, large)))
		}
	}
	for _, c := range []struct {
		id, riverID, target, desc string
		threshold                 float64
	}{
		{"W4.drain", "W4.river.drain", "w4_drain_over_river", "W4 drain (backlog, claim+ACK until empty) items/s ≥ 1.0 × River drain (same run)", targetW4Drain},
		{"W4", "W4.river", "w4_live_over_river", "W4 live (producers + claim+ACK) items/s ≥ 0.5 × River live (same run)", targetW4Live},
		{"W4.one_session", "W4.river", "w4_live_one_session_over_river", "W4 live with one session (River: one client) items/s ≥ 0.5 × River live (same run)", targetW4Live},
	} {
		w4, river := rep.result(c.id), rep.result(c.riverID)
		if w4 == nil && c.id == "W4.one_session" && rep.result("W4") != nil {
			continue // -w4-sessions 1: the W4 line is the one-session line
		}
		if ok(w4) && ok(river) {
			ts = append(ts, newTarget(c.target, c.desc, ">=", c.threshold, "×", ratio(w4.Throughput, river.Throughput), true, ""))
		} else {
			ts = append(ts, newTarget(c.target, c.desc, ">=", c.threshold, "×", 0, false, missing(w4, river)))
		}
	}
	// The target is judged on the JSON-RPC client (like with like, see w5); the Go SDK
	// client's figure, which carries that client's CPU on the shared cores, is listed too.
	for _, c := range []struct{ transport, label string }{{"mcp_http", "MCP streamable HTTP"}, {"mcp_http_sdk", "MCP streamable HTTP with the Go SDK client"}} {
		for _, kind := range []string{"read", "write"} {
			httpR, mcpR := rep.result("W5.http."+kind), rep.result("W5."+c.transport+"."+kind)
			desc := fmt.Sprintf("W5 %s %s p50 ≤ 1.5 × direct HTTP", c.label, kind)
			id := "w5_" + c.transport + "_" + kind
			if ok(httpR) && ok(mcpR) {
				ts = append(ts, newTarget(id, desc, "<=", targetW5MCPHTTP, "×", ratio(mcpR.P50Ms, httpR.P50Ms), true, ""))
			} else {
				ts = append(ts, newTarget(id, desc, "<=", targetW5MCPHTTP, "×", 0, false, missing(httpR, mcpR)))
			}
		}
	}
	for _, op := range []string{"claim", "ack", "inbox_list"} {
		small, large := rep.result(fmt.Sprintf("W6.%s.%d", op, w6Sizes[0])), rep.result(fmt.Sprintf("W6.%s.%d", op, w6Sizes[len(w6Sizes)-1]))
		desc := fmt.Sprintf("W6 %s p50 at %s rows ≤ 1.3 × at %s rows (with receipts and %d live leases)", op,
			countLabel(w6Sizes[len(w6Sizes)-1]), countLabel(w6Sizes[0]), w6Leases)
		if ok(small) && ok(large) {
			ts = append(ts, newTarget("w6_"+op+"_growth", desc, "<=", targetW6Growth, "×", ratio(large.P50Ms, small.P50Ms), true, ""))
		} else {
			ts = append(ts, newTarget("w6_"+op+"_growth", desc, "<=", targetW6Growth, "×", 0, false, missing(small, large)))
		}
	}
	{ // the same rule for an inbox of unread rows (its page reports their count)
		small, large := rep.result(fmt.Sprintf("W6.inbox_list_unread.%d", w6Sizes[0])), rep.result(fmt.Sprintf("W6.inbox_list_unread.%d", w6Sizes[len(w6Sizes)-1]))
		desc := fmt.Sprintf("W6 inbox_list p50 at %s unread rows ≤ 1.3 × at %s unread rows", countLabel(w6Sizes[len(w6Sizes)-1]), countLabel(w6Sizes[0]))
		if ok(small) && ok(large) {
			ts = append(ts, newTarget("w6_inbox_list_unread_growth", desc, "<=", targetW6Growth, "×", ratio(large.P50Ms, small.P50Ms), true, ""))
		} else {
			ts = append(ts, newTarget("w6_inbox_list_unread_growth", desc, "<=", targetW6Growth, "×", 0, false, missing(small, large)))
		}
	}
	{
		fresh, large := rep.result("W6.send.new_box"), rep.result("W6.send.large_box")
		desc := "W6 send p50 in a new box and in a box of " + countLabel(w6Sizes[len(w6Sizes)-1]) + " messages within 1.2× (larger over smaller)"
		if ok(fresh) && ok(large) {
			ts = append(ts, newTarget("w6_send_new_vs_large", desc, "<=", targetW6Send, "×",
				math.Max(ratio(fresh.P50Ms, large.P50Ms), ratio(large.P50Ms, fresh.P50Ms)), true,
				fmt.Sprintf("new %.2f ms, large %.2f ms", fresh.P50Ms, large.P50Ms)))
		} else {
			ts = append(ts, newTarget("w6_send_new_vs_large", desc, "<=", targetW6Send, "×", 0, false, missing(fresh, large)))
		}
	}
	for _, id := range []string{"W1", "W4"} {
		r := rep.result(id)
		desc := fmt.Sprintf("server peak RSS during %s ≤ 200 MiB", id)
		switch {
		case ok(r) && r.RSSPeakMiB > 0:
			ts = append(ts, newTarget("rss_"+strings.ToLower(id), desc, "<=", targetRSSMiB, "MiB", r.RSSPeakMiB, true, ""))
		case ok(r):
			ts = append(ts, newTarget("rss_"+strings.ToLower(id), desc, "<=", targetRSSMiB, "MiB", 0, false, "server process not known (external server without -server-pid)"))
		default:
			ts = append(ts, newTarget("rss_"+strings.ToLower(id), desc, "<=", targetRSSMiB, "MiB", 0, false, missing(r)))
		}
	}
	for _, r := range rep.Results {
		if !r.API {
			continue
		}
		desc := fmt.Sprintf("%s ≥ 3000 requests/s (30 × 100 req/s)", r.Workload)
		ts = append(ts, newTarget("rate_"+strings.ToLower(strings.ReplaceAll(r.ID, ".", "_")), desc, ">=", targetRequestsPerS, "req/s",
			r.RequestsPerS, r.Status == StatusOK, missing(&r)))
	}
	rep.Targets = ts
}

// countLabel renders 10000 as "10k" and 1000000 as "1M".
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	default:
		return fmt.Sprint(n)
	}
}

// JSON renders the report as indented JSON. NaN values never reach it: unavailable
// ratios are nil.
func (rep *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Markdown renders the report as a Markdown document.
func (rep *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Agentbox benchmark\n\n")
	fmt.Fprintf(&b, "Generated %s by `agentbox bench` (%s server). %d clients, %s measured per phase after a %s warm-up; total run %s.\n\n",
		rep.GeneratedAt.UTC().Format(time.RFC3339), rep.Run.Server, rep.Run.Clients,
		secs(rep.Run.DurationS), secs(rep.Run.WarmupS), secs(rep.Run.TotalSeconds))
	fmt.Fprintf(&b, "Machine: %d cores", rep.Machine.Cores)
	if rep.Machine.CPUModel != "" {
		fmt.Fprintf(&b, " (%s)", rep.Machine.CPUModel)
	}
	fmt.Fprintf(&b, ", %s, %s", rep.Machine.OS, rep.Machine.GoVersion)
	if rep.Machine.LoadAverage != "" {
		fmt.Fprintf(&b, ", load average %s at start", rep.Machine.LoadAverage)
	}
	fmt.Fprintf(&b, ". Server DB pool max conns: %s.\n\n", rep.Run.ServerPool)
	if pg := rep.Postgres; pg != nil {
		fmt.Fprintf(&b, "PostgreSQL %s (%s):", pg.Version, pg.Source)
		keys := make([]string, 0, len(pg.Settings))
		for k := range pg.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s=%s", sep, k, pg.Settings[k])
		}
		b.WriteString(".\n\n")
	}

	b.WriteString("## Results\n\n")
	b.WriteString("| id | workload | status | throughput | unit | req/s | p50 ms | p99 ms | errors | clients | peak RSS MiB |\n")
	b.WriteString("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Results {
		if r.Status != StatusOK {
			fmt.Fprintf(&b, "| %s | %s | %s | | | | | | | | |\n", r.ID, r.Workload, mdEscape(statusText(r)))
			continue
		}
		rps := ""
		if r.API {
			rps = fmt.Sprintf("%.0f", r.RequestsPerS)
		}
		rss := ""
		if r.RSSPeakMiB > 0 {
			rss = fmt.Sprintf("%.1f", r.RSSPeakMiB)
		}
		fmt.Fprintf(&b, "| %s | %s | ok | %.0f | %s | %s | %.2f | %.2f | %d | %d | %s |\n",
			r.ID, r.Workload, r.Throughput, r.Unit, rps, r.P50Ms, r.P99Ms, r.Errors, r.Clients, rss)
	}

	b.WriteString("\n## Targets\n\n")
	b.WriteString("| target | value | goal | status |\n|---|---:|---:|---|\n")
	for _, t := range rep.Targets {
		val := "—"
		if t.Value != nil {
			val = formatValue(*t.Value, t.Unit)
		}
		status := t.Status
		if t.Note != "" {
			status += " — " + t.Note
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s |\n", t.Description, val, t.Comparator, formatValue(t.Threshold, t.Unit), mdEscape(status))
	}

	var details []string
	for _, r := range rep.Results {
		if r.Status != StatusOK || len(r.Extra) == 0 {
			continue
		}
		keys := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%s", k, trimFloat(r.Extra[k]))
		}
		line := fmt.Sprintf("- %s: %s", r.ID, strings.Join(parts, ", "))
		if r.Note != "" {
			line += " — " + r.Note
		}
		details = append(details, line)
	}
	if len(details) > 0 {
		b.WriteString("\n## Diagnostics\n\n")
		b.WriteString(strings.Join(details, "\n"))
		b.WriteString("\n")
	}
	rep.markdownDBProfiles(&b)
	if len(rep.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	if rep.ProfileTop != "" {
		b.WriteString("\n## W1 server CPU profile (top)\n\n```\n")
		b.WriteString(strings.TrimRight(rep.ProfileTop, "\n"))
		b.WriteString("\n```\n")
	}
	return b.String()
}

func statusText(r Result) string {
	if r.Note == "" {
		return r.Status
	}
	if r.Status == StatusNotAvailable {
		return r.Note
	}
	return r.Status + ": " + r.Note
}

func formatValue(v float64, unit string) string {
	switch unit {
	case "×":
		if v < 0.1 { // small ratios (W1 over W0) need a third digit to agree with their verdict
			return fmt.Sprintf("%.3f×", v)
		}
		return fmt.Sprintf("%.2f×", v)
	case "":
		return trimFloat(v)
	default:
		return trimFloat(v) + " " + unit
	}
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

// mdEscape keeps a cell on one line and its pipes literal.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// WriteFiles writes latest.md and latest.json into dir.
func (rep *Report) WriteFiles(dir string) (mdPath, jsonPath string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	js, err := rep.JSON()
	if err != nil {
		return "", "", err
	}
	mdPath, jsonPath = filepath.Join(dir, "latest.md"), filepath.Join(dir, "latest.json")
	if err := os.WriteFile(jsonPath, js, 0o644); err != nil {
		return "", "", err
	}
	return mdPath, jsonPath, os.WriteFile(mdPath, []byte(rep.Markdown()), 0o644)
}
