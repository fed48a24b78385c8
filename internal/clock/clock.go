// Package clock is the time source of the service. Tests use Fake to move time
// (leases, idempotency retention) instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock returns the current time.
type Clock interface{ Now() time.Time }

// System is the real clock.
type System struct{}

// Now returns UTC time at microsecond precision (what PostgreSQL stores), so a value
// read back from the database equals the one returned to the caller.
func (System) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Fake is a clock that only moves when told to.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake starts a fake clock at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC().Truncate(time.Microsecond)} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake clock forward.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}
