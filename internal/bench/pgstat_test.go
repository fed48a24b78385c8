package bench

import (
	"strings"
	"testing"
	"time"
)

func TestDBProfileIsTheWindowsDifference(t *testing.T) {
	before := counters{wal: 1000, walOK: true, stmts: map[int64]stmtRow{
		1: {query: "SELECT 1", calls: 10, totalMs: 5},
		2: {query: "UPDATE  t\n SET x = $1", calls: 4, totalMs: 100},
	}}
	after := counters{wal: 21000, walOK: true, stmts: map[int64]stmtRow{
		1: {query: "SELECT 1", calls: 30, totalMs: 9},                   // 20 calls, 4 ms
		2: {query: "UPDATE  t\n SET x = $1", calls: 4, totalMs: 100},    // idle in the window: left out
		3: {query: "INSERT INTO m VALUES ($1)", calls: 20, totalMs: 60}, // first seen in the window
	}}
	p := dbProfile(before, after, 10)
	if p == nil || p.WALBytesPerOp != 2000 || p.StatementsPerOp == nil || *p.StatementsPerOp != 4 {
		t.Fatalf("profile %+v", p)
	}
	if len(p.Top) != 2 || p.Top[0].Query != "INSERT INTO m VALUES ($1)" || p.Top[0].Calls != 20 || p.Top[0].MeanMs != 3 || p.Top[1].TotalMs != 4 {
		t.Errorf("top %+v", p.Top)
	}
	// Without pg_stat_statements: WAL only.
	p = dbProfile(counters{wal: 0, walOK: true}, counters{wal: 500, walOK: true}, 5)
	if p == nil || p.WALBytesPerOp != 100 || p.StatementsPerOp != nil || p.Top != nil {
		t.Errorf("WAL-only profile %+v", p)
	}
	if dbProfile(counters{}, counters{}, 5) != nil || dbProfile(before, after, 0) != nil {
		t.Error("a profile without WAL positions or operations")
	}
	if q := oneLine("SELECT\n   a,\tb " + strings.Repeat("x", 300)); strings.ContainsAny(q, "\n\t") || len([]rune(q)) != 161 {
		t.Errorf("oneLine %q", q)
	}
}

func TestMarkdownDBProfiles(t *testing.T) {
	rep := sampleReport()
	spo := 5.0
	rep.Results[1].DB = &DBProfile{WALBytesPerOp: 12345, StatementsPerOp: &spo,
		Top: []TopStatement{{Query: "SELECT a | b", Calls: 7, TotalMs: 70, MeanMs: 10}}}
	md := rep.Markdown()
	for _, want := range []string{"## Database per operation", "**W1.first** (W1.first label): 12345 WAL bytes/op, 5.00 statements/op",
		"| `SELECT a \\| b` | 7 | 70 | 10.000 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	rep.StatementsNote = "pg_stat_statements not available: the PostgreSQL server does not preload it"
	if md := rep.Markdown(); !strings.Contains(md, "pg_stat_statements not available: the PostgreSQL server does not preload it.") {
		t.Errorf("the note is missing:\n%s", md)
	}
}

func TestCPUPerOpIsTheWindowsDifference(t *testing.T) {
	stat := []byte("cpu  100 5 40 9000 30 2 3 50 0 0\ncpu0 50 2 20 4500 15 1 1 25 0 0\n")
	busy, err := parseMachineBusy(stat)
	if err != nil || busy != 150*10*time.Millisecond { // user+nice+system+irq+softirq; not idle, iowait, steal
		t.Fatalf("parseMachineBusy = %v, %v; want 1.5s", busy, err)
	}
	if _, err := parseMachineBusy([]byte("intr 1 2 3\n")); err == nil {
		t.Error("parseMachineBusy accepted a file without the cpu line")
	}
	before := cpuTimes{machine: time.Second, server: 200 * time.Millisecond, client: 100 * time.Millisecond, machineOK: true, serverOK: true, clientOK: true}
	after := cpuTimes{machine: 3 * time.Second, server: 700 * time.Millisecond, client: 300 * time.Millisecond, machineOK: true, serverOK: true, clientOK: true}
	c := cpuPerOp(before, after, 1000)
	if c == nil || c.Machine != 2 || c.Server == nil || *c.Server != 0.5 || c.Client == nil || *c.Client != 0.2 {
		t.Fatalf("cpuPerOp = %+v", c)
	}
	if md := c.markdown(); !strings.Contains(md, "machine 2.000 ms (server 0.500, load generator 0.200, the rest (PostgreSQL and anything else running) 1.300)") {
		t.Errorf("markdown %q", md)
	}
	after.serverOK = false
	if c := cpuPerOp(before, after, 1000); c == nil || c.Server != nil || strings.Contains(c.markdown(), "the rest") {
		t.Errorf("without the server's reading: %+v", c)
	}
	if cpuPerOp(before, cpuTimes{}, 1000) != nil || cpuPerOp(before, after, 0) != nil {
		t.Error("CPU per op without the machine's readings or operations")
	}
}
