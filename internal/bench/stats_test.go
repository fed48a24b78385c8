package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func durations(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	// 1..100 ms: the p-th percentile is exactly p ms under nearest rank.
	var s []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose: summarize sorts
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	l := summarize(s)
	for _, c := range []struct {
		got, want time.Duration
		name      string
	}{
		{l.P50, 50 * time.Millisecond, "p50"},
		{l.P90, 90 * time.Millisecond, "p90"},
		{l.P99, 99 * time.Millisecond, "p99"},
		{l.Max, 100 * time.Millisecond, "max"},
		{l.Mean, 50500 * time.Microsecond, "mean"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if l.Count != 100 {
		t.Errorf("count = %d", l.Count)
	}
}

func TestPercentileSmallSets(t *testing.T) {
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: %v", got)
	}
	one := durations(7)
	for _, p := range []float64{0.1, 50, 99, 100} {
		if got := percentile(one, p); got != 7*time.Millisecond {
			t.Errorf("single sample p%v = %v", p, got)
		}
	}
	// Two samples: p50 is the lower (rank ceil(1.0) = 1), p99 the upper.
	two := durations(1, 9)
	if got := percentile(two, 50); got != time.Millisecond {
		t.Errorf("p50 of two = %v", got)
	}
	if got := percentile(two, 99); got != 9*time.Millisecond {
		t.Errorf("p99 of two = %v", got)
	}
	// p99 of 10 samples is the maximum: a tail of one sample is never averaged away.
	ten := durations(1, 1, 1, 1, 1, 1, 1, 1, 1, 500)
	if got := summarize(ten).P99; got != 500*time.Millisecond {
		t.Errorf("p99 of ten = %v", got)
	}
	if (summarize(nil) != Latency{}) {
		t.Error("summary of nothing is not zero")
	}
}

func TestMergeAndRates(t *testing.T) {
	m := merge([][]time.Duration{durations(3, 1), nil, durations(2)})
	l := summarize(m)
	if l.Count != 3 || l.P50 != 2*time.Millisecond || l.Max != 3*time.Millisecond {
		t.Errorf("merged summary = %+v", l)
	}
	if got := perSecond(500, 2*time.Second); got != 250 {
		t.Errorf("perSecond = %v", got)
	}
	if got := perSecond(5, 0); got != 0 {
		t.Errorf("perSecond over nothing = %v", got)
	}
	if !math.IsNaN(ratio(1, 0)) || ratio(1, 4) != 0.25 {
		t.Error("ratio")
	}
	if ms(1500*time.Microsecond) != 1.5 {
		t.Error("ms")
	}
}

func TestWindow(t *testing.T) {
	w := window{from: time.Unix(10, 0), to: time.Unix(20, 0)}
	for _, c := range []struct {
		at       int64
		in, over bool
	}{{9, false, false}, {10, true, false}, {15, true, false}, {20, true, true}, {21, false, true}} {
		at := time.Unix(c.at, 0)
		if w.in(at) != c.in || w.over(at) != c.over {
			t.Errorf("at %d: in=%v over=%v", c.at, w.in(at), w.over(at))
		}
	}
}

func TestPhaseCountsOnlyTheWindow(t *testing.T) {
	p := phase{Clients: 3, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond}
	res, err := p.run(t.Context(), nil, func(ctx context.Context, c int) (int, error) {
		time.Sleep(10 * time.Millisecond)
		return 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// At most 3 clients × 30 ops of ≥ 10 ms fit in the 300 ms window; counting the warm-up
	// would allow up to 120. (No lower bound: a loaded machine may run fewer.)
	if res.Ops < 1 || res.Ops > 95 {
		t.Errorf("ops = %d, want 1..95", res.Ops)
	}
	if res.Requests != 2*res.Ops || res.Latency.Count != int(res.Ops) {
		t.Errorf("requests %d, samples %d for %d ops", res.Requests, res.Latency.Count, res.Ops)
	}
	if res.Latency.P50 < 10*time.Millisecond {
		t.Errorf("p50 %v below the op's own sleep", res.Latency.P50)
	}
}

func TestPhaseStopsOnNotAvailable(t *testing.T) {
	p := phase{Clients: 4, Duration: 10 * time.Second}
	start := time.Now()
	_, err := p.run(t.Context(), nil, func(ctx context.Context, c int) (int, error) {
		return 1, notAvailable("message_send not implemented")
	})
	if na, ok := errorsAsNotAvailable(err); !ok || na.Error() != "not available: message_send not implemented" {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Error("the phase ran on after a not-available answer")
	}
}

func TestPhaseStopsAFailingClient(t *testing.T) {
	p := phase{Clients: 1, Duration: 10 * time.Second}
	_, err := p.run(t.Context(), nil, func(ctx context.Context, c int) (int, error) {
		return 1, &APIError{Op: "message_send", Status: 500, Code: "STORAGE_FAILURE"}
	})
	if err == nil || !strings.Contains(err.Error(), "failed 50 times in a row") || !strings.Contains(err.Error(), "STORAGE_FAILURE") {
		t.Fatalf("err = %v", err)
	}
}

func TestPhaseAbandonsStuckOperations(t *testing.T) {
	defer func(d time.Duration) { abandonAfter = d }(abandonAfter)
	abandonAfter = 100 * time.Millisecond
	p := phase{Clients: 3, Duration: 200 * time.Millisecond}
	start := time.Now()
	res, err := p.run(t.Context(), nil, func(ctx context.Context, c int) (int, error) {
		if c == 0 {
			time.Sleep(5 * time.Millisecond)
			return 1, nil
		}
		<-ctx.Done() // a request the server never answers
		return 1, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("the phase waited %v for stuck operations", el)
	}
	if res.Abandoned != 2 || res.Errors != 0 || res.Ops == 0 {
		t.Errorf("abandoned %d, errors %d, ops %d", res.Abandoned, res.Errors, res.Ops)
	}
	r := Result{ID: "W2"}.fromPhase(res, 3)
	if r.Status != StatusOK || !strings.Contains(r.Note, "2 operations still running") {
		t.Errorf("result %+v", r)
	}
	if r := (Result{ID: "W2"}).fromPhase(&phaseResult{Elapsed: time.Second}, 3); r.Status != StatusFailed || !strings.Contains(r.Note, "no operation completed") {
		t.Errorf("a phase without operations: %+v", r)
	}
}

func TestBarLine(t *testing.T) {
	got := barLine("W1", 5*time.Second, 10*time.Second, 1234, false)
	if !strings.Contains(got, "[############............]") || !strings.Contains(got, "1234 ops") {
		t.Errorf("bar = %q", got)
	}
	if full := barLine("W1", 20*time.Second, 10*time.Second, 0, false); strings.Contains(full, ".]") {
		t.Errorf("overdue bar not full: %q", full)
	}
	if warm := barLine("W1", time.Second, 10*time.Second, 0, true); !strings.Contains(warm, "warm-up") || strings.Contains(warm, "ops") {
		t.Errorf("warm-up bar = %q", warm)
	}
}
