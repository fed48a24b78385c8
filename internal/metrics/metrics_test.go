package metrics

import (
	"context"
	"strings"
	"testing"
	"time"
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
