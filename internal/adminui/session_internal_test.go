package adminui

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testdb"
)

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newSessions(st, slog.New(slog.DiscardHandler))
	s.now = func() time.Time { return now }
	tokenHash := []byte("0123456789abcdef0123456789abcdef")

	id, err := s.create(ctx, tokenHash)
	if err != nil {
		t.Fatal(err)
	}
	if tok, csrf, ok, _ := s.lookup(ctx, id); !ok || string(tok) != string(tokenHash) || csrf == "" || csrf == id {
		t.Fatalf("fresh session: %q %q %v", tok, csrf, ok)
	}
	if _, _, ok, _ := s.lookup(ctx, "someone-else"); ok {
		t.Fatal("an unknown ID is a session")
	}
	// Another instance (its own sessions value on the same database) serves the session.
	other := newSessions(st, slog.New(slog.DiscardHandler))
	other.now = s.now
	if _, _, ok, _ := other.lookup(ctx, id); !ok {
		t.Fatal("a session must survive a change of instance")
	}
	s.setFlash(ctx, id, "done")
	if other.takeFlash(ctx, id) != "done" || s.takeFlash(ctx, id) != "" {
		t.Fatal("a notice is shown exactly once")
	}

	// Idle: unused for longer than idleTimeout ends it.
	now = now.Add(idleTimeout + time.Second)
	if _, _, ok, _ := s.lookup(ctx, id); ok {
		t.Fatal("an idle session survived")
	}

	// Lifetime: in use all along, it still ends after maxLifetime.
	id, _ = s.create(ctx, tokenHash)
	for end := now.Add(maxLifetime); now.Before(end); now = now.Add(idleTimeout / 2) {
		if _, _, ok, _ := s.lookup(ctx, id); !ok {
			t.Fatalf("a session in use ended early, %v after start", maxLifetime-end.Sub(now))
		}
	}
	now = now.Add(time.Second)
	if _, _, ok, _ := s.lookup(ctx, id); ok {
		t.Fatal("a session outlived maxLifetime")
	}
	// Signing out ends it everywhere.
	id, _ = s.create(ctx, tokenHash)
	other.end(ctx, id)
	if _, _, ok, _ := s.lookup(ctx, id); ok {
		t.Fatal("a signed-out session survived on another instance")
	}

	// Expired sessions are swept on the next sign-in.
	now = now.Add(maxLifetime + time.Hour)
	s.create(ctx, tokenHash) //nolint:errcheck
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM admin_ui_sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d sessions held (%v), want 1", n, err)
	}
}
