package server

import "runtime/debug"

// The Go runtime's defaults (GOGC=100, no memory limit) collect whenever the heap doubles.
// The server's live heap is small (tens of MiB) and churns fast: every request allocates its
// decoded body, its rows and its encoded answer, and drops them. At GOGC=100 the collector
// took a fifth of the server's CPU in the W4 drain and an eighth in the W1 send (pprof,
// runtime.gcBgMarkWorker), on cores the server shares with PostgreSQL. Collecting when the
// heap reaches five times the live heap instead cut the server's CPU per operation by about a
// fifth in the drain and a tenth in W1 (bench, alternating runs), for a peak RSS of about
// 105 MiB instead of 60. The soft memory limit bounds that growth: near it the runtime
// collects as often as it must, whatever the percentage says.
const (
	serverGCPercent   = 400
	serverMemoryLimit = 512 << 20
)

// tuneGC applies the server's collector settings, except those the operator set through the
// runtime's own environment variables (GOGC, GOMEMLIMIT), which the runtime has applied.
// getenv is os.Getenv outside tests.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serverMemoryLimit)
	}
}
