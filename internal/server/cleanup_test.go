package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func unixSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMicro())/1e6, 'f', -1, 64)
}

// Expired idempotency records of every box are swept (SPEC §10); a record still within its
// retention keeps replaying its original result, a swept key acts anew, and /metrics counts
// the sweeps.
func TestIdempotencyExpirySweep(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ctx := context.Background()
	save := func(a *testenv.Agent, rev int, key string) testenv.Response {
		t.Helper()
		r := a.Call("PUT", "/checkpoint", map[string]any{"expected_revision": fmt.Sprint(rev), "checkpoint": map[string]any{"rev": rev}, "idempotency_key": key})
		if r.Status != http.StatusOK {
			t.Fatalf("save %s: %d %s", key, r.Status, r.Raw)
		}
		return r
	}
	records := func() map[string]int {
		t.Helper()
		rows, err := e.Store.Pool().Query(ctx, `SELECT idem_key FROM idempotency_records`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out[k]++
		}
		return out
	}
	var agents []*testenv.Agent
	for _, box := range []string{"alpha", "beta"} {
		e.Box(box)
		a := e.NewAgent(box, "a", nil)
		a.Prime()
		agents = append(agents, a)
	}
	for _, a := range agents {
		save(a, 0, "old-"+a.BoxKey)
	}
	e.Clock.Advance(13 * time.Hour)
	young := save(agents[0], 1, "young-alpha")
	save(agents[1], 1, "young-beta")
	e.Clock.Advance(12 * time.Hour) // the old records are 25 h old (retention: 24 h), the young ones 12 h

	if n, err := e.Store.SweepExpiredIdempotency(ctx, e.Clock.Now()); err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v; want the two old records", n, err)
	}
	if got := records(); len(got) != 2 || got["young-alpha"] != 1 || got["young-beta"] != 1 {
		t.Fatalf("records after the sweep: %v", got)
	}
	// A young key still replays its original result, byte for byte.
	if r := agents[0].Call("PUT", "/checkpoint", map[string]any{"expected_revision": "1", "checkpoint": map[string]any{"rev": 1}, "idempotency_key": "young-alpha"}); !bytes.Equal(r.Raw, young.Raw) {
		t.Fatalf("replay after the sweep: %s, want %s", r.Raw, young.Raw)
	}
	// A swept key is a new action: with the current revision it saves, and is recorded again.
	if r := save(agents[0], 2, "old-alpha"); r.JSON()["revision"] != "3" {
		t.Fatalf("a swept key acting anew: %s", r.Raw)
	}
	if got := records(); got["old-alpha"] != 1 {
		t.Fatalf("the swept key's new record: %v", got)
	}
	if n, err := e.Store.SweepExpiredIdempotency(ctx, e.Clock.Now()); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v; want nothing", n, err)
	}
	for sample, want := range map[string]string{
		`agentbox_cleanup_up{job="idempotency_expiry"}`:                             "1",
		`agentbox_cleanup_runs_total{job="idempotency_expiry"}`:                     "2",
		`agentbox_cleanup_failures_total{job="idempotency_expiry"}`:                 "0",
		`agentbox_cleanup_deleted_total{job="idempotency_expiry"}`:                  "2",
		`agentbox_cleanup_last_success_timestamp_seconds{job="idempotency_expiry"}`: unixSeconds(e.Clock.Now()),
	} {
		if got := e.MetricSample(sample); got != want {
			t.Errorf("%s = %q, want %q", sample, got, want)
		}
	}
}

// /metrics shows retention (SPEC §11) as the boxes' cleanup status holds it: the retroactive
// run of a lowered cap and the runs of sends that deleted messages.
func TestRetentionMetrics(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	r := e.Do("GET", "/metrics", "", nil, nil)
	for _, want := range []string{
		"# TYPE agentbox_cleanup_runs_total counter",
		"# TYPE agentbox_cleanup_deleted_total counter",
		"# TYPE agentbox_cleanup_failures_total counter",
		"# TYPE agentbox_cleanup_last_success_timestamp_seconds gauge",
		"# TYPE agentbox_cleanup_boxes_failed gauge",
		`agentbox_cleanup_runs_total{job="retention"} 0`,
		`agentbox_cleanup_boxes_failed{job="retention"} 0`,
	} {
		if !strings.Contains(string(r.Raw), want) {
			t.Errorf("fresh /metrics lacks %q:\n%s", want, r.Raw)
		}
	}
	if strings.Contains(string(r.Raw), `agentbox_cleanup_last_success_timestamp_seconds{job="retention"}`) {
		t.Errorf("a last success before any run:\n%s", r.Raw)
	}
	e.Box("alpha")
	a, b := e.NewAgent("alpha", "a", nil), e.NewAgent("alpha", "b", nil)
	a.Prime()
	b.Prime()
	e.Admin("PATCH", "/boxes/alpha/settings", map[string]any{"settings": map[string]any{"channel_message_cap": 2}}) // a run, nothing to delete
	e.Clock.Advance(time.Minute)
	for i := range 4 { // the 3rd and 4th sends each delete the oldest message
		a.MustCall("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": b.ID},
			"body_md": fmt.Sprintf("dm %d", i), "idempotency_key": fmt.Sprintf("dm-%d", i)})
	}
	for sample, want := range map[string]string{
		`agentbox_cleanup_up{job="retention"}`:                             "1",
		`agentbox_cleanup_runs_total{job="retention"}`:                     "3",
		`agentbox_cleanup_deleted_total{job="retention"}`:                  "2",
		`agentbox_cleanup_failures_total{job="retention"}`:                 "0",
		`agentbox_cleanup_boxes_failed{job="retention"}`:                   "0",
		`agentbox_cleanup_last_success_timestamp_seconds{job="retention"}`: unixSeconds(e.Clock.Now()),
	} {
		if got := e.MetricSample(sample); got != want {
			t.Errorf("%s = %q, want %q", sample, got, want)
		}
	}
	if s := e.Admin("GET", "/boxes/alpha/cleanup", nil); s["runs"] != float64(3) || s["deleted_messages"] != float64(2) {
		t.Errorf("the admin cleanup status disagrees: %v", s)
	}
}

// A scrape answers promptly while the database does not: retention's figures are then
// unknown (up 0, no counters), and the process's own figures are still there.
func TestMetricsWhileDatabaseIsDown(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	via, proxy := testenv.AttachFaulty(t, e)
	if got := via.MetricSample(`agentbox_cleanup_up{job="retention"}`); got != "1" {
		t.Fatalf("retention up before the outage: %q", got)
	}
	proxy.Stall(true) // the database hangs: the worst case for a scrape
	defer proxy.Stall(false)
	start := time.Now()
	r := via.Do("GET", "/metrics", "", nil, nil)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the scrape took %v", took)
	}
	body := string(r.Raw)
	if r.Status != http.StatusOK || !strings.Contains(body, `agentbox_cleanup_up{job="retention"} 0`) ||
		strings.Contains(body, `agentbox_cleanup_runs_total{job="retention"}`) ||
		!strings.Contains(body, `agentbox_cleanup_runs_total{job="idempotency_expiry"} 0`) {
		t.Errorf("/metrics while the database hangs: %d\n%s", r.Status, body)
	}
}
