package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func okResult(id string, throughput, p50 float64) Result {
	return Result{ID: id, Workload: id + " label", Status: StatusOK, Throughput: throughput, P50Ms: p50, P99Ms: 2 * p50}
}

// sampleReport has every target computable except River, plus an API workload that is not
// implemented yet.
func sampleReport() *Report {
	w1 := okResult("W1", 1000, 5)
	w1.API, w1.RequestsPerS, w1.RSSPeakMiB, w1.Clients = true, 1000, 80, 64
	w4 := okResult("W4", 3100, 12)
	w4.API, w4.RequestsPerS, w4.RSSPeakMiB = true, 3500, 250
	large := okResult("W3.inbox_list.large", 900, 3)
	large.API, large.RequestsPerS = true, 900
	small := okResult("W3.inbox_list.small", 1000, 2)
	small.API, small.RequestsPerS = true, 1000
	rep := &Report{
		GeneratedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Run:         RunInfo{Clients: 64, DurationS: 20, WarmupS: 2, Server: "subprocess", ServerPool: "4", W3Small: 10_000, W3Large: 1_000_000},
		Machine:     Machine{Cores: 2, OS: "linux/amd64", GoVersion: "go1.26"},
		Postgres:    &Postgres{Version: "15.20", Source: "local", Settings: map[string]string{"fsync": "on", "synchronous_commit": "on"}},
		Results: []Result{
			okResult("W0", 3000, 1),
			okResult("W1.first", 200, 20),
			w1,
			{ID: "W2", Workload: "W2 DM round trip", Status: StatusNotAvailable, Note: "not available: inbox_list not implemented", API: true},
			small, large,
			okResult("W4.drain", 3100, 30),
			okResult("W4.river.drain", 3000, 0),
			w4,
			{ID: "W4.river", Workload: "River", Status: StatusFailed, Note: "bench-river: exit 1"},
			okResult("W5.http.read", 2000, 2),
			okResult("W5.mcp_http.read", 1500, 2.9),
			okResult("W5.http.write", 1000, 4),
			okResult("W5.mcp_http.write", 500, 8),
		},
	}
	rep.ComputeTargets()
	return rep
}

func targetByID(t *testing.T, rep *Report, id string) Target {
	t.Helper()
	for _, tg := range rep.Targets {
		if tg.ID == id {
			return tg
		}
	}
	t.Fatalf("no target %s", id)
	return Target{}
}

func TestTargets(t *testing.T) {
	rep := sampleReport()
	for _, c := range []struct {
		id     string
		status string
		value  float64
	}{
		{"w1_over_w0", TargetMet, 1000.0 / 3000},
		{"w1_first_over_w0", TargetMissed, 200.0 / 3000}, // < 0.08
		{"w4_drain_over_river", TargetMet, 3100.0 / 3000},
		{"w3_inbox_list_growth", TargetMet, 1.5}, // exactly at the bound is met
		{"w5_mcp_http_read", TargetMet, 1.45},    // ≤ 1.5
		{"w5_mcp_http_write", TargetMissed, 2},   // > 1.5
		{"rss_w1", TargetMet, 80},                // ≤ 200
		{"rss_w4", TargetMissed, 250},            // > 200
		{"rate_w1", TargetMissed, 1000},          // < 3000
		{"rate_w4", TargetMet, 3500},             // ≥ 3000
		{"rate_w3_inbox_list_large", TargetMissed, 900},
	} {
		tg := targetByID(t, rep, c.id)
		if tg.Status != c.status || tg.Value == nil || abs(*tg.Value-c.value) > 1e-9 {
			got := "nil"
			if tg.Value != nil {
				got = trimFloat(*tg.Value)
			}
			t.Errorf("%s: %s %s, want %s %v", c.id, tg.Status, got, c.status, c.value)
		}
	}
	for _, id := range []string{"w4_live_over_river", "w3_conversation_read_growth", "rate_w2"} {
		tg := targetByID(t, rep, id)
		if tg.Status != TargetNotAvailable || tg.Value != nil {
			t.Errorf("%s: %s, want not available without a value", id, tg.Status)
		}
	}
	if tg := targetByID(t, rep, "w4_live_over_river"); !strings.Contains(tg.Note, "W4.river failed") || tg.Threshold != 0.5 {
		t.Errorf("not-available note does not say why: %q", tg.Note)
	}
	if tg := targetByID(t, rep, "rate_w2"); !strings.Contains(tg.Note, "inbox_list not implemented") {
		t.Errorf("rate note: %q", tg.Note)
	}
	// Non-API lines (W0, River, W5 here) carry no request-rate target.
	for _, tg := range rep.Targets {
		if tg.ID == "rate_w0" || tg.ID == "rate_w4_river" {
			t.Errorf("unexpected target %s", tg.ID)
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestTargetDescriptionsNameTheHistorySizes(t *testing.T) {
	rep := sampleReport()
	if d := targetByID(t, rep, "w3_inbox_list_growth").Description; !strings.Contains(d, "1M") || !strings.Contains(d, "10k") {
		t.Errorf("description %q", d)
	}
	if countLabel(100_000) != "100k" || countLabel(1234) != "1234" || countLabel(2_000_000) != "2M" {
		t.Error("countLabel")
	}
}

func TestJSONOutput(t *testing.T) {
	rep := sampleReport()
	raw, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatalf("the JSON does not decode: %v", err)
	}
	if len(back.Results) != len(rep.Results) || len(back.Targets) != len(rep.Targets) {
		t.Fatalf("round trip lost lines: %d/%d results, %d/%d targets", len(back.Results), len(rep.Results), len(back.Targets), len(rep.Targets))
	}
	var generic map[string]any
	json.Unmarshal(raw, &generic) //nolint:errcheck
	for _, key := range []string{"generated_at", "run", "machine", "postgres", "results", "targets"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if generic["machine"].(map[string]any)["cores"] != float64(2) {
		t.Error("cores missing")
	}
	// An unavailable target has "value": null, never NaN (which JSON cannot carry).
	for _, tg := range generic["targets"].([]any) {
		m := tg.(map[string]any)
		if m["status"] == TargetNotAvailable && m["value"] != nil {
			t.Errorf("target %v has a value", m["id"])
		}
	}
}

func TestJSONWithoutBaselineHasNoNaN(t *testing.T) {
	rep := &Report{Results: []Result{okResult("W0", 0, 0), okResult("W1", 10, 1)}}
	rep.ComputeTargets()
	if _, err := rep.JSON(); err != nil {
		t.Fatalf("a zero baseline breaks the JSON: %v", err)
	}
	if tg := targetByID(t, rep, "w1_over_w0"); tg.Status != TargetNotAvailable {
		t.Errorf("ratio over a zero baseline: %s", tg.Status)
	}
}

func TestMarkdownOutput(t *testing.T) {
	md := sampleReport().Markdown()
	for _, want := range []string{
		"# Agentbox benchmark",
		"Machine: 2 cores",
		"PostgreSQL 15.20 (local): fsync=on, synchronous_commit=on.",
		"| id | workload | status | throughput | unit | req/s | p50 ms | p99 ms | errors | clients | peak RSS MiB |",
		"| W0 | W0 label | ok | 3000 |",
		"| W1 | W1 label | ok | 1000 |  | 1000 | 5.00 | 10.00 | 0 | 64 | 80.0 |",
		"| W2 | W2 DM round trip | not available: inbox_list not implemented |",
		"| W4.river | River | failed: bench-river: exit 1 |",
		"| W1 room send, warm, ≥ 0.08 × W0 raw insert commits/s | 0.33× | >= 0.080× | met |",
		"| W1 room send, first run, ≥ 0.08 × W0 raw insert commits/s | 0.067× | >= 0.080× | missed |",
		"| server peak RSS during W4 ≤ 200 MiB | 250 MiB | <= 200 MiB | missed |",
		"## Targets",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// Every row of the results table has the header's column count.
	results := md[strings.Index(md, "## Results"):strings.Index(md, "## Targets")]
	for _, line := range strings.Split(results, "\n") {
		if strings.HasPrefix(line, "|") && strings.Count(line, "|")-strings.Count(line, `\|`) != 12 {
			t.Errorf("row with a wrong column count: %q", line)
		}
	}
}

func TestMarkdownEscapesCells(t *testing.T) {
	rep := &Report{Results: []Result{{ID: "W1", Workload: "W1", Status: StatusFailed, Note: "a|b\nc"}}}
	md := rep.Markdown()
	if !strings.Contains(md, `failed: a\|b c`) {
		t.Errorf("cell not escaped:\n%s", md)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	md, js, err := sampleReport().WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(md) != "latest.md" || filepath.Base(js) != "latest.json" {
		t.Errorf("files %s %s", md, js)
	}
	for _, p := range []string{md, js} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}
