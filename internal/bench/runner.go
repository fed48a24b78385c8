package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// window is a measurement window: events completing inside it are counted.
type window struct{ from, to time.Time }

func newWindow(warmup, duration time.Duration) window {
	from := time.Now().Add(warmup)
	return window{from: from, to: from.Add(duration)}
}

func (w window) in(t time.Time) bool { return !t.Before(w.from) && !t.After(w.to) }

// over reports whether the window has closed at t.
func (w window) over(t time.Time) bool { return !t.Before(w.to) }

// opFunc runs one operation of client c and returns how many HTTP requests it made.
type opFunc func(ctx context.Context, c int) (requests int, err error)

// phase describes one closed-loop load phase: Clients goroutines run op back to back.
type phase struct {
	Label    string
	Clients  int
	Warmup   time.Duration
	Duration time.Duration
	// OnMeasure runs (in its own goroutine) when the measurement window opens.
	OnMeasure func(ctx context.Context, w window)
}

// phaseResult is what a phase measured: operations completed inside the window.
type phaseResult struct {
	Ops      int64
	Requests int64
	Errors   int64
	Elapsed  time.Duration // the window length
	Latency  Latency
	Samples  []time.Duration
	// FirstErrors holds a few distinct error messages for the report.
	FirstErrors []string
	// Abandoned counts operations still running abandonAfter past the window.
	Abandoned int64
	// DB is the database's work per operation over the window (set by observed).
	DB *DBProfile
}

func (r *phaseResult) perSecond() float64 { return perSecond(r.Ops, r.Elapsed) }

// maxConsecutiveErrors stops a client that only fails (server down, broken setup).
const maxConsecutiveErrors = 50

// abandonAfter is how long a phase waits, after its window closed, for operations still
// running; then it cancels them and reports how many there were (a stuck server shows up
// as a note instead of stalling the run).
var abandonAfter = 5 * time.Second

// errorLog keeps the first few distinct error messages.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := err.Error()
	if len(l.msgs) >= 3 {
		return
	}
	for _, m := range l.msgs {
		if m == msg {
			return
		}
	}
	l.msgs = append(l.msgs, msg)
}

func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// fatal records the first error that ends a phase early.
type fatal struct {
	once sync.Once
	err  error
}

func (f *fatal) set(err error, cancel context.CancelFunc) {
	f.once.Do(func() { f.err = err; cancel() })
}

// run executes the phase. A NotAvailableError from any client ends the phase and is
// returned; so is a client that fails maxConsecutiveErrors times in a row. Other errors
// are counted.
func (p phase) run(ctx context.Context, prog *progress, op opFunc) (*phaseResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWindow(p.Warmup, p.Duration)
	var ops, reqs, errs atomic.Int64
	samples := make([][]time.Duration, p.Clients)
	var elog errorLog
	var stop fatal
	if p.OnMeasure != nil {
		t := time.AfterFunc(time.Until(w.from), func() { p.OnMeasure(ctx, w) })
		defer t.Stop()
	}
	var inflight, abandoned atomic.Int64
	abandon := time.AfterFunc(time.Until(w.to)+abandonAfter, func() { abandoned.Store(inflight.Load()); cancel() })
	defer abandon.Stop()
	done := prog.start(p.Label, w, ops.Load)
	var wg sync.WaitGroup
	for c := range p.Clients {
		wg.Go(func() {
			consecutive := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				if w.over(t0) {
					return
				}
				inflight.Add(1)
				n, err := op(ctx, c)
				inflight.Add(-1)
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if _, ok := errorsAsNotAvailable(err); ok {
						stop.set(err, cancel)
						return
					}
					if w.in(t1) {
						errs.Add(1)
					}
					elog.add(err)
					if consecutive++; consecutive >= maxConsecutiveErrors {
						stop.set(fmt.Errorf("client %d failed %d times in a row; last error: %w", c, consecutive, err), cancel)
						return
					}
					continue
				}
				consecutive = 0
				if w.in(t1) {
					ops.Add(1)
					reqs.Add(int64(n))
					samples[c] = append(samples[c], t1.Sub(t0))
				}
			}
		})
	}
	wg.Wait()
	res := &phaseResult{Ops: ops.Load(), Requests: reqs.Load(), Errors: errs.Load(), Elapsed: p.Duration,
		Samples: merge(samples), FirstErrors: elog.list(), Abandoned: abandoned.Load()}
	res.Latency = summarize(res.Samples)
	if stop.err != nil {
		if _, ok := errorsAsNotAvailable(stop.err); ok {
			done("stopped")
		} else {
			done("stopped: " + stop.err.Error())
		}
		return res, stop.err
	}
	done(fmt.Sprintf("%.0f ops/s  p50 %.2f ms  p99 %.2f ms  errors %d",
		res.perSecond(), ms(res.Latency.P50), ms(res.Latency.P99), res.Errors))
	return res, nil
}

// progress shows a bar per phase when the output is a terminal, plain lines otherwise.
type progress struct {
	w   io.Writer
	tty bool
}

// start shows label while the phase runs; the returned func prints its final line.
func (p *progress) start(label string, w window, count func() int64) func(final string) {
	if p == nil || p.w == nil {
		return func(string) {}
	}
	if !p.tty {
		fmt.Fprintf(p.w, "%s: running (warm-up %s, measuring %s)\n", label,
			time.Until(w.from).Round(100*time.Millisecond), w.to.Sub(w.from))
		return func(final string) { fmt.Fprintf(p.w, "%s: %s\n", label, final) }
	}
	start := time.Now()
	total := w.to.Sub(start)
	stopc := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopc:
				return
			case now := <-tick.C:
				fmt.Fprintf(p.w, "\r\033[K%s", barLine(label, now.Sub(start), total, count(), now.Before(w.from)))
			}
		}
	})
	return func(final string) {
		close(stopc)
		wg.Wait()
		fmt.Fprintf(p.w, "\r\033[K%s: %s\n", label, final)
	}
}

// untilDone shows label for a phase that runs until its work is done (no window); the
// returned func prints its final line.
func (p *progress) untilDone(label string) func(final string) {
	p.logf("%s: running until the backlog is empty", label)
	return func(final string) { p.logf("%s: %s", label, final) }
}

// barLine renders one progress line; during the warm-up nothing is counted yet.
func barLine(label string, elapsed, total time.Duration, ops int64, warmup bool) string {
	const width = 24
	frac := 1.0
	if total > 0 {
		frac = min(max(float64(elapsed)/float64(total), 0), 1)
	}
	filled := int(frac * width)
	count := fmt.Sprintf("%9d ops", ops)
	if warmup {
		count = "  warm-up"
	}
	return fmt.Sprintf("%-34s [%s%s] %5.1fs/%.1fs %s", label,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), elapsed.Seconds(), total.Seconds(), count)
}

// logf prints a setup/progress line (never on stdout).
func (p *progress) logf(format string, a ...any) {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintf(p.w, format+"\n", a...)
}

// parallel runs fn(i) for i in [0,n) on up to workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var stop fatal
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					stop.set(err, cancel)
					return
				}
			}
		})
	}
	wg.Wait()
	if stop.err != nil {
		return stop.err
	}
	return ctx.Err()
}
