package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarizes a set of samples.
type Latency struct {
	Count int
	Mean  time.Duration
	P50   time.Duration
	P90   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// summarize computes the summary of samples; it sorts samples in place.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return Latency{
		Count: len(samples),
		Mean:  sum / time.Duration(len(samples)),
		P50:   percentile(samples, 50),
		P90:   percentile(samples, 90),
		P99:   percentile(samples, 99),
		Max:   samples[len(samples)-1],
	}
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted samples: the
// smallest sample with at least p% of the samples at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// merge concatenates per-client sample slices.
func merge(perClient [][]time.Duration) []time.Duration {
	return slices.Concat(perClient...)
}

// perSecond is n events over d.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ms is d in (fractional) milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a/b, or NaN when b is zero (no baseline).
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
