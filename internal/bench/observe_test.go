package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseProcStatus(t *testing.T) {
	st := parseProcStatus([]byte("Name:\tagentbox\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n"))
	if st["VmHWM"] != 50<<20 || st["VmRSS"] != 40<<20 {
		t.Errorf("status = %v", st)
	}
	if _, ok := st["Threads"]; ok {
		t.Error("a field without kB was read as a size")
	}
}

func TestRSSOfThisProcess(t *testing.T) {
	s := startRSS(currentPID())
	time.Sleep(60 * time.Millisecond)
	if peak := s.Stop(); peak <= 0 {
		t.Errorf("peak RSS of the test process = %v MiB", peak)
	}
	if startRSS(0).Stop() != 0 {
		t.Error("an unknown process has an RSS")
	}
}

func TestParseMetricsAndPerOp(t *testing.T) {
	before := counters{
		pg: map[string]float64{"xact_commit": 100, "tup_inserted": 1000, "tup_updated": 0, "tup_deleted": 0, "blks_read": 0},
		metrics: parseMetrics(strings.NewReader("# HELP x\nagentbox_db_pool_acquire_total 10\nagentbox_db_pool_acquire_wait_seconds_total 0.5\n" +
			`agentbox_db_pool_connections{state="max"} 4` + "\n")),
	}
	if before.metrics[`agentbox_db_pool_connections{state="max"}`] != 4 {
		t.Fatalf("labelled metric not parsed: %v", before.metrics)
	}
	after := counters{
		pg:      map[string]float64{"xact_commit": 300, "tup_inserted": 3400, "tup_updated": 1000, "tup_deleted": 0, "blks_read": 0},
		metrics: map[string]float64{"agentbox_db_pool_acquire_total": 410, "agentbox_db_pool_acquire_wait_seconds_total": 2.5},
	}
	got := perOp(before, after, 200)
	want := map[string]float64{"db_transactions_per_op": 1, "db_rows_inserted_per_op": 12, "db_rows_updated_per_op": 5,
		"pool_acquires_per_op": 2, "pool_wait_ms_per_op": 10}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if perOp(before, after, 0) != nil {
		t.Error("per-op figures without operations")
	}
}

func TestWorkloadHelpers(t *testing.T) {
	if b := body1KiB("w1 abc c1 n1"); len(b) != 1024 || !strings.HasPrefix(b, "w1 abc c1 n1 x") {
		t.Errorf("body of %d bytes: %q…", len(b), b[:20])
	}
	at := time.Unix(0, 1767323045123456789)
	if got, ok := sentAt("w4 t=1767323045123456789 p3 n9 run"); !ok || !got.Equal(at) {
		t.Errorf("sentAt = %v %v", got, ok)
	}
	if _, ok := sentAt("hello"); ok {
		t.Error("a foreign body has a send time")
	}
	if q := destinationQuery("room", "r1"); q != "destination%5Bkind%5D=room&destination%5Broom_id%5D=r1" {
		t.Errorf("room query %s", q)
	}
	if q := destinationQuery("dm", "a1"); !strings.Contains(q, "destination%5Brecipient_agent_id%5D=a1") {
		t.Errorf("dm query %s", q)
	}
	u, err := withDatabase("postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "agentbox_bench_x")
	if err != nil || u != "postgres://postgres@127.0.0.1:5432/agentbox_bench_x?sslmode=disable" {
		t.Errorf("withDatabase = %s %v", u, err)
	}
	u, err = withDatabase("postgres://agentbox@/postgres?host=%2Ftmp%2Frun&port=5432", "db2")
	if err != nil || u != "postgres://agentbox@/db2?host=%2Ftmp%2Frun&port=5432" {
		t.Errorf("withDatabase over a socket = %s %v", u, err)
	}
	if _, err := withDatabase("host=x dbname=y", "z"); err == nil {
		t.Error("a keyword DSN was accepted")
	}
	if got := withParam("postgres://h/db?sslmode=disable", "pool_max_conns", "32"); got != "postgres://h/db?pool_max_conns=32&sslmode=disable" {
		t.Errorf("withParam = %s", got)
	}
}

func TestParseProcCPU(t *testing.T) {
	line := []byte("1234 (agent box) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 200 18446744073709551615")
	d, err := parseProcCPU(line)
	if err != nil || d != 3*time.Second {
		t.Fatalf("parseProcCPU = %v, %v; want 3s", d, err)
	}
	if _, err := procCPU(currentPID()); err != nil {
		t.Fatalf("own CPU time: %v", err)
	}
}
