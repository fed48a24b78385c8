// Package metrics keeps the service's Prometheus counters (text exposition format, no
// client library): requests and latency by operation and status, the database pool, and
// whatever gauges other packages register (e.g. cleanup jobs).
package metrics

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// latencyBuckets are the histogram upper bounds in seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

type requestKey struct {
	op        string
	transport string
	status    int
}

type histogram struct {
	counts []uint64 // per bucket, cumulative when written
	sum    float64
	n      uint64
}

// Registry holds the metrics of one server process.
type Registry struct {
	mu       sync.Mutex
	requests map[requestKey]uint64
	latency  map[string]*histogram // by operation
	pool     *pgxpool.Pool
}

// New returns an empty registry; pool may be nil.
func New(pool *pgxpool.Pool) *Registry {
	return &Registry{requests: map[requestKey]uint64{}, latency: map[string]*histogram{}, pool: pool}
}

// Observe records one finished request of an operation.
func (r *Registry) Observe(op, transport string, status int, d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[requestKey{op, transport, status}]++
	h := r.latency[op]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets))}
		r.latency[op] = h
	}
	s := d.Seconds()
	for i, b := range latencyBuckets {
		if s <= b {
			h.counts[i]++
			break
		}
	}
	h.sum += s
	h.n++
}

// Write renders the registry in the Prometheus text format.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	keys := make([]requestKey, 0, len(r.requests))
	for k := range r.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.op != b.op {
			return a.op < b.op
		}
		if a.transport != b.transport {
			return a.transport < b.transport
		}
		return a.status < b.status
	})
	fmt.Fprintln(w, "# HELP agentbox_requests_total Finished requests by operation, transport and HTTP status.")
	fmt.Fprintln(w, "# TYPE agentbox_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "agentbox_requests_total{operation=%q,transport=%q,status=\"%d\"} %d\n", k.op, k.transport, k.status, r.requests[k])
	}
	ops := make([]string, 0, len(r.latency))
	for op := range r.latency {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	fmt.Fprintln(w, "# HELP agentbox_request_duration_seconds Request latency by operation.")
	fmt.Fprintln(w, "# TYPE agentbox_request_duration_seconds histogram")
	for _, op := range ops {
		h := r.latency[op]
		var cum uint64
		for i, b := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "agentbox_request_duration_seconds_bucket{operation=%q,le=\"%g\"} %d\n", op, b, cum)
		}
		fmt.Fprintf(w, "agentbox_request_duration_seconds_bucket{operation=%q,le=\"+Inf\"} %d\n", op, h.n)
		fmt.Fprintf(w, "agentbox_request_duration_seconds_sum{operation=%q} %g\n", op, h.sum)
		fmt.Fprintf(w, "agentbox_request_duration_seconds_count{operation=%q} %d\n", op, h.n)
	}
	r.mu.Unlock()
	if r.pool != nil {
		st := r.pool.Stat()
		fmt.Fprintln(w, "# HELP agentbox_db_pool_connections Database pool connections by state.")
		fmt.Fprintln(w, "# TYPE agentbox_db_pool_connections gauge")
		fmt.Fprintf(w, "agentbox_db_pool_connections{state=\"acquired\"} %d\n", st.AcquiredConns())
		fmt.Fprintf(w, "agentbox_db_pool_connections{state=\"idle\"} %d\n", st.IdleConns())
		fmt.Fprintf(w, "agentbox_db_pool_connections{state=\"max\"} %d\n", st.MaxConns())
		fmt.Fprintln(w, "# HELP agentbox_db_pool_acquire_total Connection acquisitions.")
		fmt.Fprintln(w, "# TYPE agentbox_db_pool_acquire_total counter")
		fmt.Fprintf(w, "agentbox_db_pool_acquire_total %d\n", st.AcquireCount())
		fmt.Fprintf(w, "agentbox_db_pool_acquire_wait_seconds_total %g\n", st.AcquireDuration().Seconds())
	}
}
