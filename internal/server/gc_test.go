package server

import (
	"math"
	"runtime/debug"
	"testing"
)

// The server collects at serverGCPercent under a soft limit of serverMemoryLimit unless the
// operator set GOGC or GOMEMLIMIT, whose values the runtime then keeps.
func TestTuneGCKeepsWhatTheOperatorSet(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })

	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GC percent %d, want %d", got, serverGCPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != serverMemoryLimit {
		t.Errorf("memory limit %d, want %d", got, int64(serverMemoryLimit))
	}

	tuneGC(func(name string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[name] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GC percent changed to %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: memory limit changed to %d", got)
	}
}
