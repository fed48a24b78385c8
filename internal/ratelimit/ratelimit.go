// Package ratelimit is the per-key request rate limit of SPEC §11 (off unless a box sets
// rate_limit_per_second): a token bucket per API key, kept by each server process.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Limiter holds one bucket per API key.
type Limiter struct {
	mu      sync.Mutex
	buckets map[uuid.UUID]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns an empty limiter.
func New() *Limiter { return &Limiter{buckets: map[uuid.UUID]*bucket{}} }

// Allow takes one token from key's bucket, which refills at perSecond and holds at most
// burst tokens (at least perSecond, and at least 1). perSecond <= 0 means no limit. When
// refused, retryAfter is how long until a token is available.
func (l *Limiter) Allow(key uuid.UUID, perSecond, burst int64, now time.Time) (ok bool, retryAfter time.Duration) {
	if perSecond <= 0 {
		return true, 0
	}
	capacity := float64(max(burst, perSecond, 1))
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: capacity, last: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(capacity, b.tokens+elapsed*float64(perSecond))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := (1 - b.tokens) / float64(perSecond)
	return false, time.Duration(wait * float64(time.Second))
}
