package service_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/testenv"
)

// callWhileAgentRowHeld runs call while another transaction holds the agent's row (as another
// session writing the same last_seen_at observation would) and fails if the call waits for
// it or does not answer 200; the row is released before it returns.
func callWhileAgentRowHeld(t *testing.T, w *world, agentID uuid.UUID, what string, call func() testenv.Response) {
	t.Helper()
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, w.e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // releases the row
	if _, err := tx.Exec(ctx, `SELECT 1 FROM agents WHERE agent_id = $1 FOR NO KEY UPDATE`, agentID); err != nil {
		t.Fatal(err)
	}
	done := make(chan testenv.Response, 1)
	go func() { done <- call() }()
	select {
	case r := <-done:
		if r.Status != http.StatusOK {
			t.Fatalf("%s while the agent row is held: %d %s", what, r.Status, r.Raw)
		}
	case <-time.After(10 * time.Second):
		tx.Rollback(ctx) //nolint:errcheck // lets the blocked call finish
		<-done
		t.Fatalf("%s waited for the transaction holding the agent's row", what)
	}
}

// The last_seen_at observation never makes a call wait: while another transaction holds the
// agent's row (another session writing the same observation), a call that finds the
// observation due skips it and answers; the next call writes it.
func TestLastSeenObservationNeverWaits(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a")
	a := w.agents["a"]
	a.Prime()
	if _, err := w.e.Store.Pool().Exec(context.Background(), `UPDATE agents SET last_seen_at = NULL WHERE agent_id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	callWhileAgentRowHeld(t, w, a.ID, "checkpoint_get", func() testenv.Response { return a.Call("GET", "/checkpoint", nil) })
	if n := dbInt(t, w.e, `SELECT count(*) FROM agents WHERE agent_id = $1 AND last_seen_at IS NOT NULL`, a.ID); n != 0 {
		t.Fatalf("last_seen_at written through a held row lock")
	}
	a.MustCall("GET", "/checkpoint", nil)
	if n := dbInt(t, w.e, `SELECT count(*) FROM agents WHERE agent_id = $1 AND last_seen_at IS NOT NULL`, a.ID); n != 1 {
		t.Fatalf("last_seen_at not written once the row was free")
	}
}

// Priming is a call like any other: it records the last_seen_at observation (an agent that
// only primed was seen), and never waits for it either.
func TestPrimeRecordsLastSeen(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "a", "b")
	a, b := w.agents["a"], w.agents["b"]
	if _, err := w.e.Store.Pool().Exec(context.Background(), `UPDATE agents SET listed = true, last_seen_at = NULL WHERE agent_id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	callWhileAgentRowHeld(t, w, a.ID, "agent_prime", func() testenv.Response { return a.Call("POST", "/prime", map[string]any{}) })
	b.Prime()
	if got := b.MustCall("GET", "/directory/"+a.ID.String(), nil); got["last_seen_at"] != nil {
		t.Fatalf("last_seen_at written through a held row lock: %v", got)
	}
	a.Prime()
	if got := b.MustCall("GET", "/directory/"+a.ID.String(), nil); got["last_seen_at"] == nil {
		t.Fatalf("a primed agent shows no last_seen_at: %v", got)
	}
}
