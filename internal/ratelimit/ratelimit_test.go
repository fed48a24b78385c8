package ratelimit

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestBucket(t *testing.T) {
	l := New()
	k, other := uuid.New(), uuid.New()
	t0 := time.Unix(1000, 0)
	// rate 2/s, burst 3: three at once, then refused until half a second refills a token.
	for i := range 3 {
		if ok, _ := l.Allow(k, 2, 3, t0); !ok {
			t.Fatalf("request %d refused within burst", i)
		}
	}
	ok, wait := l.Allow(k, 2, 3, t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over burst: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := l.Allow(other, 2, 3, t0); !ok {
		t.Fatal("another key has its own bucket")
	}
	if ok, _ := l.Allow(k, 2, 3, t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("refilled token refused")
	}
	if ok, _ := l.Allow(k, 0, 0, t0); !ok {
		t.Fatal("rate 0 means no limit")
	}
}
