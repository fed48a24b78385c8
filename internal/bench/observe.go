package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rssSampler follows the server's resident set during a workload: it resets the
// kernel's high-water mark (VmHWM) at start and samples VmRSS, so the peak is the
// workload's, not the process's lifetime.
type rssSampler struct {
	pid  int
	mu   sync.Mutex
	peak int64 // bytes
	stop chan struct{}
	done chan struct{}
}

func startRSS(pid int) *rssSampler {
	if pid <= 0 {
		return nil
	}
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	// "5" resets VmHWM to the current RSS (Linux ≥ 4.0); harmless where unsupported.
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) //nolint:errcheck
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) sample() {
	st, err := procStatus(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.peak = max(s.peak, st["VmRSS"], st["VmHWM"])
	s.mu.Unlock()
}

// Stop ends sampling and returns the peak in MiB (0 when the process could not be read).
func (s *rssSampler) Stop() float64 {
	if s == nil {
		return 0
	}
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.peak) / (1 << 20)
}

// procStatus reads the kB fields of /proc/<pid>/status as bytes.
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	return parseProcStatus(b), nil
}

func parseProcStatus(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[k] = n << 10
			}
		}
	}
	return out
}

// scrapeMetrics reads the server's /metrics (Prometheus text) into name{labels} → value.
func (h *harness) scrapeMetrics(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", h.c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if t := os.Getenv("AGENTBOX_METRICS_TOKEN"); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := h.c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body), nil
}

func parseMetrics(r io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// counters is a snapshot of what the server and the database did, to turn into per-op
// diagnostics over a workload: database commits and rows written (pg_stat_database of
// the benchmark database) and the server's pool acquisitions and waits (/metrics).
type counters struct {
	pg      map[string]float64
	metrics map[string]float64
	wal     float64 // WAL position in bytes (pg_current_wal_lsn), when walOK
	walOK   bool
	stmts   map[int64]stmtRow // pg_stat_statements by queryid; nil when not available
	cpu     cpuTimes
}

// cpuTimes is CPU time used so far: by the whole machine (every core's busy time, from
// /proc/stat), by the server process and by this load generator, each with whether it
// could be read. On a machine whose cores the database, the server and the load generator
// share, CPU per operation is the efficiency figure that throughput only shows through
// noise: another tenant's load lowers throughput but not the CPU an operation costs here.
type cpuTimes struct {
	machine, server, client       time.Duration
	machineOK, serverOK, clientOK bool
}

// readCPU reads the CPU times now (the server's only when its process ID is known).
func (h *harness) readCPU() cpuTimes {
	var t cpuTimes
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		t.machine, err = parseMachineBusy(b)
		t.machineOK = err == nil
	}
	if h.serverPID > 0 {
		t.server, t.serverOK = procCPUOK(h.serverPID)
	}
	t.client, t.clientOK = procCPUOK(os.Getpid())
	return t
}

// parseMachineBusy sums the busy fields of /proc/stat's "cpu" line (user, nice, system,
// irq, softirq: idle, iowait and steal are not this machine's work), in clock ticks of
// 10 ms (USER_HZ).
func parseMachineBusy(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("bench: unexpected /proc/stat")
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

var pgCounterColumns = []string{"xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted", "tup_returned", "tup_fetched", "blks_read", "blks_hit"}

func (h *harness) snapshot(ctx context.Context) counters {
	var c counters
	if h.pool != nil {
		// pg_stat_database is updated when backends report (at most every second or at
		// idle); forcing a flush of our own backend keeps ours out of the way.
		row := h.pool.QueryRow(ctx, "SELECT "+strings.Join(pgCounterColumns, ", ")+" FROM pg_stat_database WHERE datname = current_database()")
		vals := make([]int64, len(pgCounterColumns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if row.Scan(ptrs...) == nil {
			c.pg = map[string]float64{}
			for i, col := range pgCounterColumns {
				c.pg[col] = float64(vals[i])
			}
		}
	}
	h.snapshotDB(ctx, &c)
	c.metrics, _ = h.scrapeMetrics(ctx)
	return c
}

// perOp turns the difference of two snapshots into per-operation diagnostics.
func perOp(before, after counters, ops int64) map[string]float64 {
	if ops <= 0 {
		return nil
	}
	out := map[string]float64{}
	n := float64(ops)
	if before.pg != nil && after.pg != nil {
		out["db_transactions_per_op"] = (after.pg["xact_commit"] - before.pg["xact_commit"]) / n
		out["db_rows_inserted_per_op"] = (after.pg["tup_inserted"] - before.pg["tup_inserted"]) / n
		out["db_rows_updated_per_op"] = (after.pg["tup_updated"] - before.pg["tup_updated"]) / n
		out["db_rows_deleted_per_op"] = (after.pg["tup_deleted"] - before.pg["tup_deleted"]) / n
		out["db_blocks_read_per_op"] = (after.pg["blks_read"] - before.pg["blks_read"]) / n
	}
	if before.metrics != nil && after.metrics != nil {
		const acq, wait = "agentbox_db_pool_acquire_total", "agentbox_db_pool_acquire_wait_seconds_total"
		if _, ok := after.metrics[acq]; ok {
			out["pool_acquires_per_op"] = (after.metrics[acq] - before.metrics[acq]) / n
			out["pool_wait_ms_per_op"] = (after.metrics[wait] - before.metrics[wait]) * 1000 / n
		}
	}
	return out
}

// procCPU is the CPU time (user + system) process pid has used, from /proc/<pid>/stat, in
// clock ticks of 10 ms (USER_HZ, 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcCPU(b)
}

func parseProcCPU(b []byte) (time.Duration, error) {
	// The command name (field 2) is parenthesized and may hold spaces: fields count from
	// the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: unexpected /proc stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc stat line")
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

func procCPUOK(pid int) (time.Duration, bool) {
	d, err := procCPU(pid)
	return d, err == nil
}
