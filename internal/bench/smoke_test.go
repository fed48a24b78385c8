package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSmoke runs W0 and W1 for about a second each against a test server: the harness
// prepares its box through the real admin and agent APIs and measures. W1 is skipped while
// message_send or the room operations are not implemented.
func TestSmoke(t *testing.T) {
	e := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{
		ServerURL: e.URL, AdminToken: testenv.AdminToken, DatabaseURL: e.DBURL,
		Clients: 4, W1Rooms: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Workloads: []string{"w0", "w1"},
	})
	if err != nil {
		t.Fatalf("bench.Run: %v", err)
	}
	find := func(id string) bench.Result {
		for _, r := range rep.Results {
			if r.ID == id {
				return r
			}
		}
		t.Fatalf("no result %s in %+v", id, rep.Results)
		return bench.Result{}
	}
	t.Run("W0", func(t *testing.T) {
		r := find("W0")
		if r.Status != bench.StatusOK || r.Ops == 0 || r.Throughput <= 0 || r.P50Ms <= 0 || r.Errors != 0 {
			t.Fatalf("W0 = %+v", r)
		}
		t.Logf("W0: %.0f commits/s, p50 %.2f ms", r.Throughput, r.P50Ms)
	})
	for _, id := range []string{"W1.first", "W1"} {
		t.Run(id, func(t *testing.T) {
			r := find(id)
			if r.Status == bench.StatusNotAvailable {
				t.Skipf("W1: %s", r.Note)
			}
			if r.Status != bench.StatusOK || r.Ops == 0 || r.Errors != 0 || r.RequestsPerS <= 0 {
				t.Fatalf("%s = %+v", id, r)
			}
			// WAL is read wherever the database answers; statements only with pg_stat_statements.
			if r.DB == nil || r.DB.WALBytesPerOp <= 0 || (r.DB.StatementsPerOp == nil) != (rep.StatementsNote != "") {
				t.Errorf("%s database profile %+v with statements note %q", id, r.DB, rep.StatementsNote)
			}
			t.Logf("%s: %.0f messages/s, p50 %.2f ms", id, r.Throughput, r.P50Ms)
		})
	}
	md := rep.Markdown()
	if !strings.Contains(md, "| W0 |") || !strings.Contains(md, "W1 room send, first run, ≥ 0.08 × W0") ||
		!strings.Contains(md, "W1 room send, warm, ≥ 0.08 × W0") || !strings.Contains(md, "## Database per operation") {
		t.Errorf("Markdown:\n%s", md)
	}
	if rep.Postgres == nil || rep.Postgres.Settings["fsync"] == "" || rep.Machine.Cores == 0 {
		t.Errorf("machine/PostgreSQL facts missing: %+v %+v", rep.Machine, rep.Postgres)
	}
}

// TestSmokeW5 runs W5 briefly: the direct HTTP client, the JSON-RPC client that replays the
// Go SDK client's requests, and the SDK client itself all complete their calls without an
// error (MCP stdio needs the agentbox binary, which a test binary is not: not available).
func TestSmokeW5(t *testing.T) {
	e := testenv.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{
		ServerURL: e.URL, AdminToken: testenv.AdminToken, DatabaseURL: e.DBURL,
		Clients: 2, W5Clients: 2, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Workloads: []string{"w5"},
	})
	if err != nil {
		t.Fatalf("bench.Run: %v", err)
	}
	byID := map[string]bench.Result{}
	for _, r := range rep.Results {
		byID[r.ID] = r
	}
	for _, transport := range []string{"http", "mcp_http", "mcp_http_sdk"} {
		for _, kind := range []string{"read", "write"} {
			id := "W5." + transport + "." + kind
			if r, ok := byID[id]; !ok || r.Status != bench.StatusOK || r.Ops == 0 || r.Errors != 0 {
				t.Errorf("%s = %+v", id, r)
			}
		}
	}
	if md := rep.Markdown(); !strings.Contains(md, "W5 MCP streamable HTTP read p50 ≤ 1.5 × direct HTTP") ||
		!strings.Contains(md, "W5 MCP streamable HTTP with the Go SDK client write p50 ≤ 1.5 × direct HTTP") {
		t.Errorf("Markdown without both W5 targets:\n%s", md)
	}
}
