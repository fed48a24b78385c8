// Package metrics renders the service's Prometheus metrics (text exposition format, no
// client library): requests and latency by operation, transport and status, errors by their
// SPEC §12 code (409 alone stands for five of them), the database
// pool, and the cleanup jobs (agentbox_cleanup_*, by job: the idempotency-record sweeper and
// retention), whose figures a CleanupSource supplies at each scrape. Other packages render
// their own lines beside these (internal/upload's staging gauges).
package metrics

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
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

type errorKey struct {
	op        string
	transport string
	code      string
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
	errors   map[errorKey]uint64
	latency  map[string]*histogram // by operation
	pool     *pgxpool.Pool
	cleanup  CleanupSource
}

// CleanupJob is one cleanup job's figures at a scrape.
type CleanupJob struct {
	Job string // the job label
	// Known is false when the figures could not be read (the database did not answer in
	// time): the job then has only agentbox_cleanup_up 0.
	Known                   bool
	Runs, Failures, Deleted int64
	LastSuccess             time.Time // zero: no successful run known
	BoxesFailed             *int64    // boxes whose last run failed (jobs with a state per box)
}

// CleanupSource reports the cleanup jobs at a scrape; ctx is the scrape request's.
type CleanupSource func(ctx context.Context) []CleanupJob

// SetCleanup sets where the cleanup jobs' figures come from (nil: none rendered).
func (r *Registry) SetCleanup(src CleanupSource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanup = src
}

// New returns an empty registry; pool may be nil.
func New(pool *pgxpool.Pool) *Registry {
	return &Registry{requests: map[requestKey]uint64{}, errors: map[errorKey]uint64{}, latency: map[string]*histogram{}, pool: pool}
}

// Observe records one finished request of an operation; code is the error code of an error
// answer ("" for success, or when the transport has none).
func (r *Registry) Observe(op, transport string, status int, code string, d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[requestKey{op, transport, status}]++
	if code != "" {
		r.errors[errorKey{op, transport, code}]++
	}
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

// Write renders the registry in the Prometheus text format; ctx bounds the cleanup source.
func (r *Registry) Write(ctx context.Context, w io.Writer) {
	r.mu.Lock()
	cleanup := r.cleanup
	keys := slices.SortedFunc(maps.Keys(r.requests), func(a, b requestKey) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.transport, b.transport), cmp.Compare(a.status, b.status))
	})
	fmt.Fprintln(w, "# HELP agentbox_requests_total Finished requests by operation, transport and HTTP status.")
	fmt.Fprintln(w, "# TYPE agentbox_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "agentbox_requests_total{operation=%q,transport=%q,status=\"%d\"} %d\n", k.op, k.transport, k.status, r.requests[k])
	}
	errs := slices.SortedFunc(maps.Keys(r.errors), func(a, b errorKey) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.transport, b.transport), cmp.Compare(a.code, b.code))
	})
	fmt.Fprintln(w, "# HELP agentbox_request_errors_total Requests answered with an error, by operation, transport and error code.")
	fmt.Fprintln(w, "# TYPE agentbox_request_errors_total counter")
	for _, k := range errs {
		fmt.Fprintf(w, "agentbox_request_errors_total{operation=%q,transport=%q,code=%q} %d\n", k.op, k.transport, k.code, r.errors[k])
	}
	ops := slices.Sorted(maps.Keys(r.latency))
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
		fmt.Fprintln(w, "# HELP agentbox_db_pool_acquire_wait_seconds_total Time spent acquiring connections, summed over successful acquisitions.")
		fmt.Fprintln(w, "# TYPE agentbox_db_pool_acquire_wait_seconds_total counter")
		fmt.Fprintf(w, "agentbox_db_pool_acquire_wait_seconds_total %g\n", st.AcquireDuration().Seconds())
	}
	if cleanup != nil {
		writeCleanup(w, cleanup(ctx))
	}
}

// writeCleanup renders the cleanup jobs, one family at a time.
func writeCleanup(w io.Writer, jobs []CleanupJob) {
	family := func(name, kind, help string, sample func(j CleanupJob) (string, bool)) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, j := range jobs {
			if v, ok := sample(j); ok {
				fmt.Fprintf(w, "%s{job=%q} %s\n", name, j.Job, v)
			}
		}
	}
	count := func(f func(CleanupJob) int64) func(j CleanupJob) (string, bool) {
		return func(j CleanupJob) (string, bool) { return strconv.FormatInt(f(j), 10), j.Known }
	}
	family("agentbox_cleanup_up", "gauge", "Whether the cleanup job's figures could be read at this scrape (retention's are read from the database).",
		func(j CleanupJob) (string, bool) {
			if j.Known {
				return "1", true
			}
			return "0", true
		})
	family("agentbox_cleanup_runs_total", "counter", "Cleanup runs: idempotency_expiry counts this process's sweeps; retention the runs in every box's cleanup status (database totals: writes whose retention deleted messages, retroactive cleanups after a lowered cap).",
		count(func(j CleanupJob) int64 { return j.Runs }))
	family("agentbox_cleanup_failures_total", "counter", "Failed cleanup runs: idempotency_expiry sweeps of this process; failed retroactive retention cleanups, in every box (database totals).",
		count(func(j CleanupJob) int64 { return j.Failures }))
	family("agentbox_cleanup_deleted_total", "counter", "Rows cleanup deleted: idempotency records (idempotency_expiry), messages (retention).",
		count(func(j CleanupJob) int64 { return j.Deleted }))
	family("agentbox_cleanup_last_success_timestamp_seconds", "gauge", "Unix time of the job's last successful run (retention: the newest run of a box whose last run succeeded).",
		func(j CleanupJob) (string, bool) {
			if !j.Known || j.LastSuccess.IsZero() {
				return "", false
			}
			return strconv.FormatFloat(float64(j.LastSuccess.UnixMicro())/1e6, 'f', -1, 64), true
		})
	family("agentbox_cleanup_boxes_failed", "gauge", "Boxes whose last cleanup run failed.",
		func(j CleanupJob) (string, bool) {
			if !j.Known || j.BoxesFailed == nil {
				return "", false
			}
			return strconv.FormatInt(*j.BoxesFailed, 10), true
		})
}
