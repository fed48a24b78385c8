package adminui

import (
	"testing"
	"time"
)

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newSessions()
	s.now = func() time.Time { return now }

	id := s.create("token")
	if tok, csrf, ok := s.lookup(id); !ok || tok != "token" || csrf == "" || csrf == id {
		t.Fatalf("fresh session: %q %q %v", tok, csrf, ok)
	}
	if _, _, ok := s.lookup("someone-else"); ok {
		t.Fatal("an unknown ID is a session")
	}
	s.setFlash(id, "done")
	if s.takeFlash(id) != "done" || s.takeFlash(id) != "" {
		t.Fatal("a notice is shown exactly once")
	}

	// Idle: unused for longer than idleTimeout ends it.
	now = now.Add(idleTimeout + time.Second)
	if _, _, ok := s.lookup(id); ok {
		t.Fatal("an idle session survived")
	}

	// Lifetime: in use all along, it still ends after maxLifetime.
	id = s.create("token")
	for end := now.Add(maxLifetime); now.Before(end); now = now.Add(idleTimeout / 2) {
		if _, _, ok := s.lookup(id); !ok {
			t.Fatalf("a session in use ended early, %v after start", maxLifetime-end.Sub(now))
		}
	}
	now = now.Add(time.Second)
	if _, _, ok := s.lookup(id); ok {
		t.Fatal("a session outlived maxLifetime")
	}

	// Expired sessions are swept on the next sign-in.
	s.create("token")
	if len(s.m) != 1 {
		t.Fatalf("%d sessions held, want 1", len(s.m))
	}
}
