package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Each cleanup family has its HELP and TYPE once, then a sample per job; a job whose figures
// are unknown has only its up gauge at 0, and a job that never succeeded no timestamp.
func TestCleanupJobMetrics(t *testing.T) {
	failed := int64(2)
	r := New(nil)
	r.SetCleanup(func(context.Context) []CleanupJob {
		return []CleanupJob{
			{Job: "idempotency_expiry", Known: true, Runs: 3, Failures: 1, Deleted: 1500, LastSuccess: time.Unix(1767323105, 250_000_000)},
			{Job: "retention", Known: true, Runs: 7, BoxesFailed: &failed},
			{Job: "other"},
		}
	})
	var b strings.Builder
	r.Write(context.Background(), &b)
	out := b.String()
	for _, want := range []string{
		"# TYPE agentbox_cleanup_up gauge\nagentbox_cleanup_up{job=\"idempotency_expiry\"} 1\nagentbox_cleanup_up{job=\"retention\"} 1\nagentbox_cleanup_up{job=\"other\"} 0\n",
		"# TYPE agentbox_cleanup_runs_total counter\nagentbox_cleanup_runs_total{job=\"idempotency_expiry\"} 3\nagentbox_cleanup_runs_total{job=\"retention\"} 7\n#",
		"agentbox_cleanup_failures_total{job=\"idempotency_expiry\"} 1\n",
		"agentbox_cleanup_deleted_total{job=\"idempotency_expiry\"} 1500\n",
		"# TYPE agentbox_cleanup_last_success_timestamp_seconds gauge\nagentbox_cleanup_last_success_timestamp_seconds{job=\"idempotency_expiry\"} 1767323105.25\n#",
		"# TYPE agentbox_cleanup_boxes_failed gauge\nagentbox_cleanup_boxes_failed{job=\"retention\"} 2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	for _, family := range []string{"up", "runs_total", "failures_total", "deleted_total", "last_success_timestamp_seconds", "boxes_failed"} {
		if n := strings.Count(out, "# HELP agentbox_cleanup_"+family+" "); n != 1 {
			t.Errorf("%d HELP lines for agentbox_cleanup_%s", n, family)
		}
	}
	if n := strings.Count(out, `{job="other"}`); n != 1 {
		t.Errorf("an unknown job has figures beyond its up gauge:\n%s", out)
	}
}

// Every sample belongs to a family with exactly one HELP and one TYPE line, both before its
// first sample (promtool check metrics refuses a sample without them); a histogram's
// _bucket, _sum and _count samples belong to the histogram. Every family is rendered with
// samples: requests, latency, the database pool (a pool that never connected) and cleanup.
func TestEveryFamilyHasHelpAndType(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := New(pool)
	r.Observe("me_get", "http", 200, "", 3*time.Millisecond)
	r.Observe("message_send", "mcp", 401, "AUTH_FAILED", time.Second)
	r.SetCleanup(func(context.Context) []CleanupJob {
		failed := int64(0)
		return []CleanupJob{{Job: "idempotency_expiry", Known: true, Runs: 1, LastSuccess: time.Unix(1767323105, 0)},
			{Job: "retention", Known: true, BoxesFailed: &failed, LastSuccess: time.Unix(1767323105, 0)}}
	})
	var b strings.Builder
	r.Write(context.Background(), &b)
	help, types := map[string]int{}, map[string]string{}
	typeLines := map[string]int{}
	sampled := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			if text == "" {
				t.Errorf("HELP of %s has no text", name)
			}
			if sampled[name] {
				t.Errorf("HELP of %s after its samples", name)
			}
			help[name]++
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			if sampled[name] {
				t.Errorf("TYPE of %s after its samples", name)
			}
			types[name] = kind
			typeLines[name]++
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			t.Errorf("unexpected line %q", line)
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (types[base] == "histogram" || types[base] == "summary") {
				family = base
			}
		}
		sampled[family] = true
		if help[family] != 1 || typeLines[family] != 1 {
			t.Errorf("sample %q: its family %s has %d HELP and %d TYPE lines before it, want one each", line, family, help[family], typeLines[family])
		}
	}
	for name := range help {
		if help[name] != 1 || typeLines[name] != 1 {
			t.Errorf("%s: %d HELP and %d TYPE lines, want one each", name, help[name], typeLines[name])
		}
		if !sampled[name] {
			t.Errorf("%s has no sample here: the test should render every family", name)
		}
	}
	for _, family := range []string{"agentbox_requests_total", "agentbox_request_duration_seconds", "agentbox_db_pool_connections",
		"agentbox_db_pool_acquire_total", "agentbox_db_pool_acquire_wait_seconds_total", "agentbox_cleanup_up"} {
		if !sampled[family] {
			t.Errorf("no sample of %s:\n%s", family, b.String())
		}
	}
}
