package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// BenchmarkCallCost: what one call of the hot paths costs in CPU, one client at a time over
// HTTP to an in-process server on a real PostgreSQL: go-cpu-us/op is this process (server and
// client), pg-cpu-us/op every postgres process of the machine (backends, WAL writer,
// autovacuum; /proc, so a quiet database server is assumed). CPU time moves less with the
// shared machine's load than latency does; compare variants within one run (-count).
func BenchmarkCallCost(b *testing.B) {
	e := testenv.New(b)
	// As agentbox serve does: planner statistics kept within a factor of two of the tables
	// (store.KeepStatistics), so no plan made on a young table outlives its youth.
	stats, stop := context.WithCancel(context.Background())
	defer stop()
	go e.Store.KeepStatistics(stats, 2*time.Second, slog.New(slog.DiscardHandler))
	e.Box("cost")
	// Room for claim_ack's messages: retention would delete the oldest past the default cap.
	e.Admin("PATCH", "/boxes/cost/settings", map[string]any{"settings": map[string]any{"channel_message_cap": 10_000_000}})
	sender := e.NewAgent("cost", "sender", nil)
	worker := e.NewAgent("cost", "worker", nil)
	sender.Prime()
	worker.Prime()
	send := func(i int) {
		sender.MustCall("POST", "/messages", map[string]any{"destination": map[string]any{"kind": "dm", "recipient_agent_id": worker.ID},
			"body_md": fmt.Sprintf("cost %d %d", time.Now().UnixNano(), i), "idempotency_key": fmt.Sprintf("s-%d-%d", time.Now().UnixNano(), i)})
	}
	claim := func(i, limit int) []any {
		out := worker.MustCall("POST", "/inbox/claim", map[string]any{"limit": limit, "idempotency_key": fmt.Sprintf("c-%d-%d", time.Now().UnixNano(), i)})
		return out["items"].([]any)
	}
	ack := func(i int, items []any) {
		seqs := make([]any, len(items))
		for k, it := range items {
			seqs[k] = it.(map[string]any)["inbox_seq"]
		}
		worker.MustCall("POST", "/inbox/ack", map[string]any{"inbox_seqs": seqs, "idempotency_key": fmt.Sprintf("a-%d-%d", time.Now().UnixNano(), i)})
	}
	b.Run("dm_send", func(b *testing.B) {
		measure(b, nil, send)
	})
	b.Run("empty_claim", func(b *testing.B) {
		measure(b, func(int) {
			for len(claim(-1, 1000)) > 0 { // leases everything sent so far
			}
		}, func(i int) { claim(i, 100) })
	})
	b.Run("claim_ack_of_10", func(b *testing.B) {
		measure(b, func(n int) {
			for i := range 10 * n {
				send(i)
			}
		}, func(i int) { ack(i, claim(i, 10)) })
	})
}

// measure runs setup(b.N), then op b.N times, and reports the CPU the ops cost per call,
// this process's and the database's, besides the wall time.
func measure(b *testing.B, setup func(n int), op func(i int)) {
	if setup != nil {
		setup(b.N)
	}
	g0, p0 := processCPU(), postgresCPU()
	b.ResetTimer()
	for i := range b.N {
		op(i)
	}
	b.StopTimer()
	g1, p1 := processCPU(), postgresCPU()
	b.ReportMetric(float64((g1-g0).Microseconds())/float64(b.N), "go-cpu-us/op")
	b.ReportMetric(float64((p1-p0).Microseconds())/float64(b.N), "pg-cpu-us/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresCPU is the CPU time of every postgres process, from /proc/<pid>/stat (clock ticks:
// 10 ms each, so it is meaningful over many calls only).
func postgresCPU() time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || end < open || string(raw[open+1:end]) != "postgres" {
			continue
		}
		fields := bytes.Fields(raw[end+2:]) // from field 3 (state): utime is 14, stime 15
		if len(fields) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(string(fields[11]), 10, 64)
		s, _ := strconv.ParseInt(string(fields[12]), 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
